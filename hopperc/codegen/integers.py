"""The C++ of an i32 statement computed in 32-bit integers (ir/integer_exprs.py):
int operands and int arithmetic, exact over the whole i32 range where the f32
path is exact only below 2^24. Sums, differences, products, negation and
abs wrap past 2^31 as the hardware's IADD3 / IMAD do: the prelude's hk_wrap_*
compute them in unsigned, since an int overflow is undefined in C++ and NVRTC
would assume none (fold `a + 1 > a` to 1). Comparisons, min and max stay
signed int operations. A cast `i32(x)` of an f32 value rounds it to
nearest (cvt.rni); where's condition is an int too where it is integer_exact
(`a > b` of two i32 tiles), else computed in f32 as anywhere else."""
from __future__ import annotations

from hopperc.codegen import names
from hopperc.codegen.argmax import row_argmax
from hopperc.codegen.cexpr import ExprRenderer, shared_load, tile_element
from hopperc.codegen.scalars import WRAPPING, RoleContext, scalar
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.integer_exprs import integer_exact

_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def integer_value(exprs: ExprRenderer, expr: ir.TileExpr, role: RoleContext,
                  plane_row: str = "hk_r") -> str:
    """`expr` (integer_exact) as a C++ int at element (hk_r, hk_c) of slot hk_k."""
    def exact(e: ir.TileExpr) -> bool:
        return integer_exact(e, exprs.kernel, exprs.tiles)

    def render(e: ir.TileExpr) -> str:
        match e:
            case ir.TileRef(name=name, columns=columns):
                return tile_element(exprs.tiles[name], columns[0] // 2 if columns else 0)
            case ir.RowValues(name=name, per_row=None):
                return f"{names.user(name)}[(hk_k / 2) % 2]"
            case ir.RowValues(name=name, per_row=per_row):
                return f"{names.user(name)}[hk_k / {per_row}]"
            case ir.GlobalVector(tensor=tensor, start=start, axis=axis):
                t = exprs.kernel.tensor(tensor)
                index = f"({scalar(start, role)}) + {plane_row if axis == 'rows' else 'hk_c'}"
                bound = t.dims[0] if isinstance(t.dims[0], int) else names.user(t.dims[0])
                return (f"[&] {{ const int hk_i = {index}; return hk_i < {bound} ? "
                        f"{exprs.global_load(tensor, 'hk_i')} : 0; }}()")
            case ir.SharedRead(view=view, broadcast=None):
                return shared_load(DType.I32, exprs.element_address(view, role))
            case ir.SharedRead(view=view, broadcast=axis, elements=elements):
                index = plane_row if axis == "rows" else "hk_c"
                if elements is not None and elements[0]:
                    index = f"{index} + {elements[0]}"
                return shared_load(DType.I32, f"{exprs.view_base(view, role)} + ({index}) * 4u")
            case ir.ScalarValue(expr=value):
                return f"static_cast<int>({scalar(value, role)})"
            case ir.ElementIndex(axis=axis):
                return plane_row if axis == "row" else "hk_c"
            case ir.Literal(value=value):
                return str(int(value))
            case ir.RowReduce(name=name, partials=None):
                return row_argmax(name, exprs.tiles[name], integer=True)
            case ir.RowReduce(op=op, name=name, partials=partials):
                return exprs.row_combine(op, exprs.tiles[name], partials, role, integer=True)
            case ir.Convert(operand=operand) if exact(operand):
                return render(operand)
            case ir.Convert(operand=operand):
                return f"hk_f32_to_i32({exprs.value(operand, role, plane_row)})"
            case ir.Elementwise(op="where", args=(cond, a, b)) if exact(cond):
                return f"(({render(cond)}) != 0 ? ({render(a)}) : ({render(b)}))"
            case ir.Elementwise(op="where", args=(cond, a, b)):
                return (f"(({exprs.value(cond, role, plane_row)}) != 0.0f ? ({render(a)}) : "
                        f"({render(b)}))")
            case ir.Elementwise(op=op, args=args):
                return _operation(op, [render(a) for a in args])
        raise TypeError(e)
    return render(expr)


def _operation(op: str, vals: list[str]) -> str:
    match op:
        case "+" | "-" | "*":
            return f"{WRAPPING[op]}({vals[0]}, {vals[1]})"
        case "neg":
            return f"hk_wrap_neg({vals[0]})"
        case "abs":
            return f"hk_wrap_abs({vals[0]})"
        case "relu":
            return f"max({vals[0]}, 0)"
        case "max" | "min":
            return f"{op}({vals[0]}, {vals[1]})"
        case op if op in _COMPARISONS:
            return f"(({vals[0]}) {op} ({vals[1]}) ? 1 : 0)"
    raise ValueError(op)


class Renderer(ExprRenderer):
    """ExprRenderer whose comparisons of two integer operands (`BN * j + col() ==
    t[:, None]` of an i32 `t`) compare ints in any statement, f32 ones too: exact
    over the whole i32 range (ISETP), where comparing floats is exact only below
    2^24 and costs a conversion (I2FP) per operand."""

    def value(self, expr: ir.TileExpr, role: RoleContext, plane_row: str = "hk_r",
              hoisted=None) -> str:
        if isinstance(expr, ir.Elementwise) and expr.op in _COMPARISONS and \
                integer_exact(expr, self.kernel, self.tiles) and not (hoisted and expr in hoisted):
            a, b = (integer_value(self, arg, role, plane_row) for arg in expr.args)
            return f"(({a}) {expr.op} ({b}) ? 1.0f : 0.0f)"
        return super().value(expr, role, plane_row, hoisted)


def computes_in_integers(dtype: DType, value: ir.TileExpr, exprs: ExprRenderer) -> bool:
    """Whether a statement writing `value` to a target of `dtype` runs in ints."""
    return dtype is DType.I32 and integer_exact(value, exprs.kernel, exprs.tiles)
