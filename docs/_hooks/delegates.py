"""griffe extension: the API reference shows each method a class lists with
``name = delegate(function)`` (:func:`parkway.client.base.delegate`) as the method it is.

Read statically, such a method is an attribute whose value is a call; this turns it
into a method with the function's docstring and parameters, but the first (the
state the method passes itself), as ``help()`` and ``inspect`` show it at run time.
"""

from __future__ import annotations

from typing import Any

import griffe


class Delegates(griffe.Extension):
    """Methods made by ``delegate(function)``, documented as the function is."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **_: Any) -> None:
        if pkg.name == "parkway":
            self._methods(pkg, loader)

    def _methods(self, obj: griffe.Object, loader: griffe.GriffeLoader) -> None:
        for name, member in list(obj.members.items()):
            if member.is_alias:
                continue
            if member.is_class or member.is_module:
                self._methods(member, loader)  # type: ignore[arg-type]
            elif obj.is_class and member.is_attribute:
                target = _delegated(member, loader)  # type: ignore[arg-type]
                if target is not None:
                    obj.set_member(name, _method(name, member, target))  # type: ignore[arg-type]


def _delegated(attr: griffe.Attribute, loader: griffe.GriffeLoader) -> griffe.Function | None:
    """The function ``attr = delegate(function)`` delegates to, if that is what it is."""
    value = attr.value
    if not isinstance(value, griffe.ExprCall) or str(value.function) != "delegate":
        return None
    (argument,) = value.arguments
    target = loader.modules_collection[argument.canonical_path]  # type: ignore[union-attr]
    return target if isinstance(target, griffe.Function) else None


def _method(name: str, attr: griffe.Attribute, target: griffe.Function) -> griffe.Function:
    first, *rest = target.parameters
    self_parameter = griffe.Parameter("self", kind=first.kind)
    parameters = [self_parameter] + [
        griffe.Parameter(p.name, annotation=p.annotation, kind=p.kind, default=p.default)
        for p in rest
    ]
    method = griffe.Function(
        name,
        lineno=attr.lineno,
        endlineno=attr.endlineno,
        parameters=griffe.Parameters(*parameters),
        returns=target.returns,
    )
    method.labels |= target.labels & {"async"}
    if target.docstring is not None:
        method.docstring = griffe.Docstring(
            target.docstring.value,
            lineno=target.docstring.lineno,
            endlineno=target.docstring.endlineno,
            parent=method,
            parser=target.docstring.parser,
            parser_options=target.docstring.parser_options,
        )
    return method
