"""Nesting limits, checked on the parse tree before anything walks it recursively.

Every later stage (the AST builder, semantic checks, passes, printers, the
renderer and the simulator) recurses once or a few times per level of
statement or expression nesting. These limits keep the deepest kernel they
admit well inside Python's recursion limit, and a kernel past them gets a
located error at the construct that goes one level too deep.
"""
from __future__ import annotations

from lark import Tree

from hopperc.diagnostics import CompileError, Span

MAX_STATEMENT_DEPTH = 100  # statements with a body (kernel, role, for, if, elect, manual)
MAX_EXPRESSION_DEPTH = 100  # operators, calls, subscripts and casts inside one expression

_STATEMENT_RULES = {"kernel", "role", "for_stmt", "if_stmt", "elect_block", "manual_block"}
_EXPRESSION_RULES = {"or_", "and_", "not_", "compare", "add", "sub", "mul", "div", "mod",
                     "matmul", "neg", "subscript", "attribute", "transpose", "cast", "call"}


def check_nesting(tree: Tree, file: str) -> None:
    """Raise at the first construct (in source order) nested deeper than a limit."""
    stack: list[tuple[Tree, int, int]] = [(tree, 0, 0)]
    while stack:
        node, statements, expressions = stack.pop()
        if node.data in _STATEMENT_RULES:
            statements += 1
            if statements > MAX_STATEMENT_DEPTH:
                raise CompileError(_span(file, node), f"statements are nested more than "
                                   f"{MAX_STATEMENT_DEPTH} deep here; move the inner part into "
                                   "fewer levels")
        if node.data in _EXPRESSION_RULES:
            expressions += 1
            if expressions > MAX_EXPRESSION_DEPTH:
                raise CompileError(_span(file, node), f"this expression is nested more than "
                                   f"{MAX_EXPRESSION_DEPTH} deep; split it with intermediate "
                                   "tiles or constants")
        else:
            expressions = 0
        stack.extend((child, statements, expressions) for child in reversed(node.children)
                     if isinstance(child, Tree))


def _span(file: str, node: Tree) -> Span:
    meta = node.meta
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)
