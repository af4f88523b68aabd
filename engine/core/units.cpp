#include "engine/core/units.h"

#include <cctype>
#include <cstdio>
#include <limits>

namespace shardproof {
namespace {

// Splits "512M" into 512 and "M"; nullopt unless digits come first.
std::optional<std::pair<uint64_t, std::string>> number_and_unit(const std::string& text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string unit;
  for (; i < text.size(); ++i)
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  return std::make_pair(value, unit);
}

std::optional<uint64_t> times(uint64_t value, uint64_t factor) {
  if (factor != 0 && value > std::numeric_limits<uint64_t>::max() / factor) return std::nullopt;
  return value * factor;
}

}  // namespace

std::optional<uint64_t> parse_size(const std::string& text) {
  auto parsed = number_and_unit(text);
  if (!parsed) return std::nullopt;
  auto [value, unit] = *parsed;
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();  // "MB", "MiB"
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  if (unit.empty() || unit == "B") return value;
  const std::string units = "KMGT";
  size_t power = units.find(unit);
  if (unit.size() != 1 || power == std::string::npos) return std::nullopt;
  return times(value, uint64_t{1} << (10 * (power + 1)));
}

std::optional<int64_t> parse_duration_seconds(const std::string& text) {
  auto parsed = number_and_unit(text);
  if (!parsed) return std::nullopt;
  auto [value, unit] = *parsed;
  uint64_t factor = 0;
  if (unit.empty() || unit == "S") factor = 1;
  if (unit == "M") factor = 60;
  if (unit == "H") factor = 3600;
  if (unit == "D") factor = 86400;
  if (unit == "W") factor = 7 * 86400;
  if (factor == 0) return std::nullopt;
  std::optional<uint64_t> seconds = times(value, factor);
  if (!seconds || *seconds > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return std::nullopt;
  return static_cast<int64_t>(*seconds);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  char buf[32];
  if (unit == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", value, units[unit]);
  return buf;
}

}  // namespace shardproof
