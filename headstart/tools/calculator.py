"""A calculator over spoken arithmetic: "17 times 23", "twenty divided by four", "2 plus 3 squared",
"the square root of 81", "15 percent of 80", "half of fifty". A small recursive-descent parser over a token list; no
`eval`, no Python AST: only numbers and the operators below, and results bounded."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from headstart.tools.numbers import number_words, parse_number

_PHRASES = [  # longest first: spoken operators -> symbols
    ("multiplied by", "*"), ("divided by", "/"), ("to the power of", "^"), ("square root of", "sqrt"),
    ("percent of", "%of"), ("times", "*"), ("x", "*"), ("plus", "+"), ("minus", "-"), ("over", "/"),
    ("squared", "^2"), ("cubed", "^3"), ("add", "+"),
]
# "half of 50", "a quarter of 80": unary operators, spoken back as said
_FRACTIONS = {"half": ("halfof", 0.5), "quarter": ("quarterof", 0.25)}
_SYMBOLS = {"*": "times", "/": "divided by", "+": "plus", "-": "minus", "^": "to the power of",
            "halfof": "half of", "quarterof": "a quarter of"}
_OPERATORS = ("+", "-", "*", "/", "^", "sqrt", "%of", "halfof", "quarterof")
_MAX_ABS = 1e15


class CalculatorError(ValueError):
    """The text is no arithmetic the calculator reads, or its result is undefined (division by zero)."""


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed expression: `spoken` is how the answer repeats it ("17 times 23")."""

    tokens: tuple[str, ...]
    spoken: str


def parse_expression(text: str) -> Expression:
    """Parse spoken or written arithmetic.

    Raises:
        CalculatorError: not arithmetic (words that are neither numbers nor operators, or no operator).
    """
    t = " " + text.lower().strip().rstrip("?.!") + " "
    t = re.sub(r"(\d),(\d{3})", r"\1\2", t)
    t = re.sub(r"(?<=[a-z])-(?=[a-z])", " ", t)  # "twenty-three" as a recogniser may write it
    t = re.sub(r"(?<![a-z])(?:(?:a|one) )?(half|quarter) of(?![a-z])", lambda m: f" {_FRACTIONS[m.group(1)][0]} ", t)
    t = re.sub(r"\b(what is|what's|whats|calculate|compute|how much is|equals?)\b", " ", t)
    for phrase, symbol in _PHRASES:
        t = re.sub(rf"(?<![a-z]){re.escape(phrase)}(?![a-z])", f" {symbol} ", t)
    t = re.sub(r"(?<=[\d\s])([+*/^()-])(?=[\d\s(])", r" \1 ", t)
    raw = [w for w in t.replace("^2", " ^ 2 ").replace("^3", " ^ 3 ").split() if w not in ("the", "is", "what")]
    tokens: list[str] = []
    words: list[str] = []
    for w in raw + ["<end>"]:
        if w in number_words() or re.fullmatch(r"\d+(\.\d+)?", w) or (w == "point" and words) or (w == "and" and words):
            words.append(w)
            continue
        if words:
            value = parse_number(" ".join(words))
            if value is None:
                raise CalculatorError(f"not a number: {' '.join(words)!r}")
            tokens.append(repr(value))
            words = []
        if w == "<end>":
            break
        if w in _OPERATORS or w in ("(", ")"):
            tokens.append(w)
        else:
            raise CalculatorError(f"not arithmetic: {w!r}")
    if not any(tok in _OPERATORS for tok in tokens):
        raise CalculatorError("no operator")
    expression = Expression(tuple(tokens), "")
    evaluate(expression)  # parses it: a malformed one raises here, at match time
    return Expression(expression.tokens, _spoken(tokens))


def evaluate(expression: Expression) -> float:
    """The value of a parsed expression.

    Raises:
        CalculatorError: malformed, division by zero, or a result beyond 1e15.
    """
    parser = _Parser(list(expression.tokens))
    value = parser.sum()
    if parser.pos != len(parser.tokens):
        raise CalculatorError("trailing tokens")
    if not math.isfinite(value) or abs(value) > _MAX_ABS:
        raise CalculatorError("result out of range")
    return value


def _spoken(tokens: list[str]) -> str:
    out = []
    for tok in tokens:
        if tok == "sqrt":
            out.append("the square root of")
        elif tok == "%of":
            out.append("percent of")
        elif tok in _SYMBOLS:
            out.append(_SYMBOLS[tok])
        elif tok in "()":
            continue
        else:
            value = float(tok)
            out.append(str(int(value)) if value.is_integer() else tok)
    return " ".join(out)


class _Parser:
    """sum := product (('+'|'-') product)*; product := power (('*'|'/'|'%of') power)*;
    power := unary ('^' unary)?; unary := ('-'|'sqrt'|'halfof'|'quarterof') unary | atom;
    atom := number | '(' sum ')'."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self) -> str:
        tok = self._peek()
        if tok is None:
            raise CalculatorError("unexpected end")
        self.pos += 1
        return tok

    def sum(self) -> float:
        value = self.product()
        while self._peek() in ("+", "-"):
            op = self._take()
            rhs = self.product()
            value = value + rhs if op == "+" else value - rhs
        return value

    def product(self) -> float:
        value = self.power()
        while self._peek() in ("*", "/", "%of"):
            op = self._take()
            rhs = self.power()
            if op == "*":
                value *= rhs
            elif op == "%of":
                value = value / 100.0 * rhs
            elif rhs == 0:
                raise CalculatorError("division by zero")
            else:
                value /= rhs
        return value

    def power(self) -> float:
        base = self.unary()
        if self._peek() == "^":
            self._take()
            exponent = self.unary()
            if abs(exponent) > 64:
                raise CalculatorError("exponent too large")
            try:
                return float(base**exponent)
            except (OverflowError, ZeroDivisionError) as exc:
                raise CalculatorError(str(exc)) from exc
        return base

    def unary(self) -> float:
        tok = self._peek()
        if tok == "-":
            self._take()
            return -self.unary()
        if tok == "sqrt":
            self._take()
            value = self.unary()
            if value < 0:
                raise CalculatorError("square root of a negative number")
            return math.sqrt(value)
        if tok in ("halfof", "quarterof"):
            self._take()
            return {op: size for op, size in _FRACTIONS.values()}[tok] * self.unary()
        return self.atom()

    def atom(self) -> float:
        tok = self._take()
        if tok == "(":
            value = self.sum()
            if self._take() != ")":
                raise CalculatorError("unbalanced parenthesis")
            return value
        try:
            return float(tok)
        except ValueError as exc:
            raise CalculatorError(f"expected a number, got {tok!r}") from exc
