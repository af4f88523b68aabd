"""Python numbers -> exact plan numbers. A float is written as the simplest fraction that
rounds to it (1/3, not 0.333...): both graphs go through the same rule, and a literal that
a user meant as 1/3 or 0.1 means exactly that."""
from fractions import Fraction


def exact(x):
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"{x} has no exact value")
    decimal = Fraction(repr(x))
    simple = Fraction(x).limit_denominator(1 << 24)
    f = simple if float(simple) == x and simple.denominator < decimal.denominator else decimal
    if f.denominator == 1:
        return f.numerator
    return f"{f.numerator}/{f.denominator}"


def as_fraction(v):
    if isinstance(v, str):
        n, d = v.split("/")
        return Fraction(int(n), int(d))
    return Fraction(v)
