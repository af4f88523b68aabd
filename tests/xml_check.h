// A small strict XML 1.0 reader for tests: checks that a document is
// well-formed (UTF-8, allowed characters, one root, matching tags, quoted
// unique attributes, only the predefined entities and character references,
// no raw "<" or "&" in text or attribute values) and returns its elements
// with decoded attribute values and text. No DTDs, no namespaces: what the
// JUnit renderer must never need.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardproof::testing::xml {

struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // decoded values
  std::vector<Element> children;
  std::string text;  // the decoded character data directly inside, concatenated

  const std::string* attribute(const std::string& key) const {
    for (const auto& [k, v] : attributes)
      if (k == key) return &v;
    return nullptr;
  }
  std::vector<const Element*> children_named(const std::string& n) const {
    std::vector<const Element*> out;
    for (const Element& c : children)
      if (c.name == n) out.push_back(&c);
    return out;
  }
};

struct Document {
  std::optional<Element> root;  // set when well-formed
  std::string error;            // why not, with the byte offset
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}

  Document read() {
    Document doc;
    if (!valid_utf8()) {
      doc.error = error_;
      return doc;
    }
    if (starts("<?xml")) {
      if (!pi()) return fail(doc);
    }
    if (!misc()) return fail(doc);
    Element root;
    if (!starts("<") || !element(root, 0)) return fail(doc, "expected the root element");
    if (!misc()) return fail(doc);
    if (i_ != s_.size()) return fail(doc, "content after the root element");
    doc.root = std::move(root);
    return doc;
  }

 private:
  Document fail(Document& doc, const std::string& why = "") {
    doc.error = (error_.empty() ? why : error_) + " at byte " + std::to_string(i_);
    return doc;
  }
  bool err(const std::string& why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  bool starts(const char* p) const {
    return s_.compare(i_, std::char_traits<char>::length(p), p) == 0;
  }

  static bool xml_char(uint32_t c) {
    return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
           (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
  }

  // Every byte sequence valid UTF-8 (no overlongs, no surrogates) and every
  // character one XML allows.
  bool valid_utf8() {
    for (size_t i = 0; i < s_.size();) {
      auto b = static_cast<unsigned char>(s_[i]);
      size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
      if (len == 0 || i + len > s_.size()) return err("invalid UTF-8 at byte " + std::to_string(i));
      uint32_t c = len == 1 ? b : b & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) {
        auto n = static_cast<unsigned char>(s_[i + k]);
        if ((n & 0xC0) != 0x80) return err("invalid UTF-8 at byte " + std::to_string(i));
        c = (c << 6) | (n & 0x3F);
      }
      static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      if (c < kMin[len] || (c >= 0xD800 && c <= 0xDFFF) || !xml_char(c))
        return err("character not allowed in XML at byte " + std::to_string(i));
      i += len;
    }
    return true;
  }

  static bool name_start(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' ||
           static_cast<unsigned char>(c) >= 0x80;
  }
  static bool name_char(char c) {
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
  }
  static bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  void skip_space() {
    while (i_ < s_.size() && space(s_[i_])) ++i_;
  }

  bool name(std::string& out) {
    if (i_ >= s_.size() || !name_start(s_[i_])) return err("expected a name");
    size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    out = s_.substr(b, i_ - b);
    return true;
  }

  // Comments, processing instructions and white space between elements.
  bool misc() {
    for (;;) {
      skip_space();
      if (starts("<!--")) {
        if (!comment()) return false;
      } else if (starts("<?")) {
        if (!pi()) return false;
      } else if (starts("<!")) {
        return err("DOCTYPE and declarations are not expected");
      } else {
        return true;
      }
    }
  }
  bool comment() {
    size_t end = s_.find("--", i_ + 4);
    if (end == std::string::npos || s_.compare(end, 3, "-->") != 0)
      return err("unterminated comment or \"--\" inside it");
    i_ = end + 3;
    return true;
  }
  bool pi() {
    size_t end = s_.find("?>", i_ + 2);
    if (end == std::string::npos) return err("unterminated processing instruction");
    i_ = end + 2;
    return true;
  }

  static void append_utf8(std::string& out, uint32_t c) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }

  // At "&": one of the five predefined entities or a character reference.
  bool reference(std::string& out) {
    size_t end = s_.find(';', i_);
    if (end == std::string::npos || end - i_ > 12) return err("unterminated reference");
    std::string ref = s_.substr(i_ + 1, end - i_ - 1);
    static const std::pair<const char*, char> kEntities[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    bool known = false;
    for (const auto& [n, c] : kEntities) {
      if (ref == n) {
        out += c;
        known = true;
      }
    }
    if (!known) {
      bool hex = ref.size() > 2 && ref[0] == '#' && ref[1] == 'x';
      bool dec = !hex && ref.size() > 1 && ref[0] == '#';
      if (!hex && !dec) return err("unknown entity &" + ref + ";");
      std::string digits = ref.substr(hex ? 2 : 1);
      uint32_t c = 0;
      for (char d : digits) {
        int v = (d >= '0' && d <= '9')          ? d - '0'
                : hex && (d >= 'a' && d <= 'f') ? d - 'a' + 10
                : hex && (d >= 'A' && d <= 'F') ? d - 'A' + 10
                                                : -1;
        if (v < 0 || c > 0x10FFFF) return err("bad character reference &" + ref + ";");
        c = c * (hex ? 16 : 10) + static_cast<uint32_t>(v);
      }
      if (!xml_char(c)) return err("reference to a character XML forbids: &" + ref + ";");
      append_utf8(out, c);
    }
    i_ = end + 1;
    return true;
  }

  bool attribute_value(std::string& out) {
    if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) return err("unquoted attribute");
    char quote = s_[i_++];
    for (;;) {
      if (i_ >= s_.size()) return err("unterminated attribute value");
      char c = s_[i_];
      if (c == quote) break;
      if (c == '<') return err("\"<\" in an attribute value");
      if (c == '&') {
        if (!reference(out)) return false;
        continue;
      }
      // Attribute-value normalisation: literal white space becomes a space.
      out += space(c) ? ' ' : c;
      ++i_;
    }
    ++i_;
    return true;
  }

  bool element(Element& e, int depth) {
    if (depth > 64) return err("too deep");
    ++i_;  // "<"
    if (!name(e.name)) return false;
    for (;;) {
      size_t before = i_;
      skip_space();
      if (starts("/>")) {
        i_ += 2;
        return true;
      }
      if (starts(">")) {
        ++i_;
        break;
      }
      if (i_ == before) return err("expected white space before an attribute");
      std::string key, value;
      if (!name(key)) return false;
      skip_space();
      if (!starts("=")) return err("expected \"=\"");
      ++i_;
      skip_space();
      if (!attribute_value(value)) return false;
      if (e.attribute(key)) return err("duplicate attribute " + key);
      e.attributes.emplace_back(key, value);
    }
    // Content, up to the matching end tag.
    for (;;) {
      if (i_ >= s_.size()) return err("unterminated element <" + e.name + ">");
      if (starts("</")) {
        i_ += 2;
        std::string end;
        if (!name(end)) return false;
        if (end != e.name) return err("</" + end + "> closes <" + e.name + ">");
        skip_space();
        if (!starts(">")) return err("expected \">\"");
        ++i_;
        return true;
      }
      if (starts("<!--")) {
        if (!comment()) return false;
      } else if (starts("<![CDATA[")) {
        size_t end = s_.find("]]>", i_ + 9);
        if (end == std::string::npos) return err("unterminated CDATA");
        e.text += s_.substr(i_ + 9, end - i_ - 9);
        i_ = end + 3;
      } else if (starts("<?")) {
        if (!pi()) return false;
      } else if (starts("<")) {
        e.children.emplace_back();
        if (!element(e.children.back(), depth + 1)) return false;
      } else if (starts("&")) {
        if (!reference(e.text)) return false;
      } else {
        if (starts("]]>")) return err("\"]]>\" in text");
        e.text += s_[i_++];
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
  std::string error_;
};

inline Document parse(const std::string& text) {
  return Reader(text).read();
}

}  // namespace shardproof::testing::xml
