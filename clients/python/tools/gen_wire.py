"""Generates ``src/delayq/_wire.py`` from the server's OpenAPI document.

The client builds every request body and reads every answer through the TypedDicts this
writes, and names every route through its constants, so ``mypy --strict`` refuses a field or
a route the server does not have. ``tests/test_openapi.py`` regenerates the module from the
document a real server serves and fails when the committed one differs.

    python tools/gen_wire.py openapi.json > src/delayq/_wire.py
    python tools/gen_wire.py http://127.0.0.1:7070 > src/delayq/_wire.py
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from typing import Any, Dict, List, Tuple

Doc = Dict[str, Any]

HEADER = '''"""The wire types of the delayq HTTP API, generated from its OpenAPI document.

Do not edit: ``python tools/gen_wire.py URL > src/delayq/_wire.py`` writes it again, and
``tests/test_openapi.py`` checks that it matches what the server serves. It is long because
it holds one type for every schema of the document.
"""

from __future__ import annotations

from typing import Dict, List, Literal, NamedTuple, Optional, TypedDict


class Route(NamedTuple):
    """A method and a path template of the API."""

    method: str
    path: str
'''


def load(source: str) -> Doc:
    """The OpenAPI document at a server URL or in a file."""
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(source.rstrip("/") + "/v1/openapi.json", timeout=10) as r:
            doc: Doc = json.load(r)
            return doc
    with open(source, encoding="utf-8") as f:
        doc = json.load(f)
        return doc


def error_codes(doc: Doc) -> List[str]:
    """The error codes the document enumerates: the description of ``ErrorDetail.code``."""
    text = doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["description"]
    return re.findall(r"`([a-z_]+)`", text)


def ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def py_type(schema: Doc) -> str:
    """The Python annotation of a JSON schema."""
    if "$ref" in schema:
        return ref_name(schema["$ref"])
    if "oneOf" in schema:
        parts = [s for s in schema["oneOf"] if s.get("type") != "null"]
        nullable = len(parts) < len(schema["oneOf"])
        inner = " | ".join(py_type(s) for s in parts)
        return f"Optional[{inner}]" if nullable else inner
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        inner = py_type({**schema, "type": rest[0] if len(rest) == 1 else rest})
        return f"Optional[{inner}]" if "null" in kind else inner
    if kind == "array":
        return f"List[{py_type(schema['items'])}]"
    if kind == "object" and "properties" not in schema and "additionalProperties" in schema:
        return f"Dict[str, {py_type(schema['additionalProperties'])}]"
    simple = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
    if kind in simple:
        return simple[kind]
    raise ValueError(f"no Python type for the schema {schema}")


def typed_dict(name: str, schema: Doc) -> str:
    """A TypedDict for an object schema: its required keys in a total base class."""
    props: Doc = schema.get("properties", {})
    required = [k for k in props if k in schema.get("required", [])]
    optional = [k for k in props if k not in required]
    doc = schema.get("description", name).split("\n")[0].replace('"""', "'")
    out = []
    if required and optional:
        out.append(f"class _{name}Required(TypedDict):")
        out += [f"    {k}: {py_type(props[k])}" for k in required]
        out += ["", ""]
        out.append(f"class {name}(_{name}Required, total=False):")
        out.append(f'    """{doc}"""')
        out.append("")
        out += [f"    {k}: {py_type(props[k])}" for k in optional]
    else:
        total = "" if required else ", total=False"
        out.append(f"class {name}(TypedDict{total}):")
        out.append(f'    """{doc}"""')
        out.append("")
        out += [f"    {k}: {py_type(props[k])}" for k in required + optional]
        if not props:
            out.append("    pass")
    return "\n".join(out)


def route_name(method: str, path: str) -> str:
    """``POST /v1/topics/{topic}/jobs`` is ``POST_TOPICS_TOPIC_JOBS``."""
    parts = [p.strip("{}") for p in path.split("/") if p and p != "v1"]
    return "_".join([method.upper()] + [p.upper() for p in parts])


def camel(name: str) -> str:
    return "".join(w.capitalize() for w in name.lower().split("_"))


def routes(doc: Doc) -> List[Tuple[str, str, str, List[Doc]]]:
    out = []
    for path, ops in sorted(doc["paths"].items()):
        for method, op in sorted(ops.items()):
            query = [p for p in op.get("parameters", []) if p["in"] == "query"]
            out.append((route_name(method, path), method.upper(), path, query))
    return out


def generate(doc: Doc) -> str:
    """The module's text."""
    schemas: Doc = doc["components"]["schemas"]
    blocks = [HEADER.rstrip("\n")]
    # Enums first: the TypedDicts refer to them.
    for name, s in sorted(schemas.items()):
        if "enum" in s:
            values = ", ".join(json.dumps(v) for v in s["enum"])
            blocks.append(f'{name} = Literal[{values}]\n"""{s.get("description", name)}"""')
    for name, s in sorted(schemas.items()):
        if s.get("type") == "object":
            blocks.append(typed_dict(name, s))
    table = routes(doc)
    for name, method, path, query in table:
        if query:
            schema = {
                "type": "object",
                "description": f"The query of {method} {path}.",
                "properties": {p["name"]: p["schema"] for p in query},
                "required": [p["name"] for p in query if p.get("required")],
            }
            blocks.append(typed_dict(camel(name) + "Query", schema))
    lines = [f'{name} = Route("{method}", "{path}")' for name, method, path, _ in table]
    blocks.append("\n".join(lines))
    names = "".join(f"    {name},\n" for name, *_ in table)
    blocks.append(f'ROUTES = (\n{names})\n"""Every route of the document."""')
    codes = "\n".join(f'    "{c}",' for c in error_codes(doc))
    blocks.append(f'ERROR_CODES = (\n{codes}\n)\n"""The error codes the document lists."""')
    return "\n\n\n".join(blocks) + "\n"


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(generate(load(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
