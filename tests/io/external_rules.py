"""The published format rules of Label Studio, Prodigy and REDCap, written down from their own
documentation and code (each block cites its source), and checkers that apply them to files.

Written from the tools' rules, not from PortalReview's exporter: the tests check our files
against these, so an exporter bug that the exporter's own logic would repeat still fails.
JSON rules are JSON Schema (draft 2020-12 keywords); ``validate`` implements the subset used
here (no jsonschema dependency).
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

# --- a JSON Schema subset --------------------------------------------------------------------

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(value: Any, schema: dict, where: str = "$") -> list[str]:
    """The ways ``value`` breaks ``schema`` (empty when it conforms)."""
    errors: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_is_type(value, n) for n in names):
            return [f"{where}: expected {types}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} is not {schema['const']!r}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: shorter than {schema['minLength']}")
    if _is_type(value, "number") and value < schema.get("minimum", float("-inf")):
        errors.append(f"{where}: {value} is below {schema['minimum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{where}: more than {schema['maxItems']} items")
        for i, item in enumerate(value):
            if "items" in schema:
                errors += validate(item, schema["items"], f"{where}[{i}]")
    if isinstance(value, dict):
        errors += _validate_object(value, schema, where)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            passing = [s for s in schema[key] if not validate(value, s, where)]
            if not passing or (key == "oneOf" and len(passing) > 1):
                errors.append(f"{where}: does not match {key} {schema[key]}")
    return errors


def _validate_object(value: dict, schema: dict, where: str) -> list[str]:
    errors = [f"{where}: '{k}' is required" for k in schema.get("required", []) if k not in value]
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            errors += validate(item, properties[key], f"{where}.{key}")
        elif extra is False:
            errors.append(f"{where}: '{key}' is not allowed")
        elif isinstance(extra, dict):
            errors += validate(item, extra, f"{where}.{key}")
    return errors


# --- Label Studio ------------------------------------------------------------------------------
# Task import format: labelstud.io/guide/task_format (docs/source/includes/task_format.md and
# result_format.md in HumanSignal/label-studio) and the importer itself
# (label_studio/tasks/validation.py TaskValidator, tasks/serializers.py BaseTaskSerializerBulk):
# a task is {"data", "annotations", "predictions", "meta"}; "data" holds every $variable of the
# config's object tags; an annotation must have a "result" list; "completed_by" is a member's
# integer id or {"email": ...} (anything else is refused); the annotation "id" is kept as the
# integer import_id; "ground_truth" defaults to TRUE when absent; region ids use A-Za-z0-9_-.

LS_REGION = {
    "type": "object",
    "required": ["id", "from_name", "to_name", "type", "value"],
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"},
        "from_name": {"type": "string", "minLength": 1},
        "to_name": {"type": "string", "minLength": 1},
        "type": {"enum": ["labels", "textarea", "ranker", "pairwise", "choices"]},
        "value": {"type": "object"},
    },
}
LS_ANNOTATION = {
    "type": "object",
    "required": ["result", "ground_truth"],
    "properties": {
        "id": {"type": "integer"},
        "result": {"type": "array", "items": LS_REGION},
        "completed_by": {
            "oneOf": [
                {"type": "integer"},
                {
                    "type": "object",
                    "required": ["email"],
                    "properties": {
                        "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.\w+$"}
                    },
                },
            ]
        },
        "ground_truth": {"type": "boolean"},
        "was_cancelled": {"type": "boolean"},
        "lead_time": {"type": ["number", "null"]},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
    },
}
LS_TASK = {
    "type": "object",
    "required": ["data"],
    "additionalProperties": False,
    "properties": {
        "data": {"type": "object"},
        "annotations": {"type": "array", "items": LS_ANNOTATION},
        "predictions": {"type": "array"},
        "meta": {"type": ["object", "array"]},
    },
}
# Region values per control tag: labelstud.io/tags/<tag> and label_studio_sdk's
# label_interface/control_tags.py (LabelsValue = SpanSelection + labels, TextAreaValue,
# RankerValue "always a dict" of bucket -> item ids, PairwiseValue, ChoicesValue).
LS_VALUES = {
    "labels": {
        "type": "object",
        "required": ["start", "end", "labels"],
        "properties": {
            "start": {"type": "integer", "minimum": 0},
            "end": {"type": "integer", "minimum": 0},
            "text": {"type": "string"},
            "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
    },
    "textarea": {
        "type": "object",
        "required": ["text"],
        "properties": {"text": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    },
    "ranker": {
        "type": "object",
        "required": ["ranker"],
        "properties": {
            "ranker": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            }
        },
    },
    "pairwise": {
        "type": "object",
        "required": ["selected"],
        "properties": {"selected": {"enum": ["left", "right"]}},
    },
    "choices": {
        "type": "object",
        "required": ["choices"],
        "properties": {"choices": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    },
}
# Which data types an object tag takes (tasks/validation.py _DATA_TYPES; List: a list whose
# items each have a "text" key); control tag -> the region type it produces.
LS_OBJECT_TYPES = {"Text": (str, int, float), "HyperText": (str,), "List": (list,)}
LS_CONTROL_TYPES = {
    "Labels": "labels",
    "TextArea": "textarea",
    "Ranker": "ranker",
    "Pairwise": "pairwise",
    "Choices": "choices",
}


def check_label_studio(tasks: Any, config_xml: str) -> list[str]:
    """Everything Label Studio would refuse, or show wrongly, importing ``tasks`` into a
    project with ``config_xml``."""
    errors: list[str] = []
    view = ET.fromstring(config_xml)
    if view.tag != "View":
        errors.append("the config's root must be <View>")
    objects, controls = _ls_tags(view, errors)
    if not isinstance(tasks, list):
        return [*errors, "the task file must hold a JSON list of tasks"]
    for i, task in enumerate(tasks):
        where = f"task {i}"
        errors += validate(task, LS_TASK, where)
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            continue
        errors += _ls_data(task["data"], objects, where)
        for j, annotation in enumerate(task.get("annotations", [])):
            if validate(annotation, LS_ANNOTATION):
                continue  # reported above
            for k, region in enumerate(annotation["result"]):
                at = f"{where}, annotation {j}, region {k}"
                errors += _ls_region(region, task["data"], objects, controls, at)
    return errors


def _ls_tags(view: ET.Element, errors: list[str]) -> tuple[dict, dict]:
    objects: dict[str, ET.Element] = {}
    controls: dict[str, ET.Element] = {}
    for tag in view.iter():
        name = tag.get("name")
        if tag.tag in LS_OBJECT_TYPES:
            if not (tag.get("value", "").startswith("$")):
                errors.append(f"<{tag.tag} name={name!r}> needs value='$key'")
            objects[name] = tag
        elif tag.tag in LS_CONTROL_TYPES:
            if name in controls:
                errors.append(f"two control tags are named {name!r}")
            controls[name] = tag
    for name, tag in controls.items():
        for target in tag.get("toName", "").split(","):
            if target not in objects:
                errors.append(f"control {name!r} points to a missing object tag {target!r}")
    if set(objects) & set(controls):
        errors.append("an object tag and a control tag share a name")
    return objects, controls


def _ls_data(data: dict, objects: dict, where: str) -> list[str]:
    errors = []
    for tag in objects.values():
        key = tag.get("value", "$")[1:]
        if key not in data:
            errors.append(f"{where}: data lacks {key!r}, which <{tag.tag}> shows")
        elif not isinstance(data[key], LS_OBJECT_TYPES[tag.tag]):
            errors.append(f"{where}: data[{key!r}] has the wrong type for <{tag.tag}>")
        elif tag.tag == "List" and not all("text" in item for item in data[key]):
            errors.append(f"{where}: each item of List data[{key!r}] must have a 'text' key")
    return errors


def _ls_region(region: dict, data: dict, objects: dict, controls: dict, where: str) -> list:
    errors = validate(region["value"], LS_VALUES[region["type"]], f"{where}.value")
    control = controls.get(region["from_name"])
    if control is None:
        return [*errors, f"{where}: no control tag named {region['from_name']!r}"]
    if LS_CONTROL_TYPES[control.tag] != region["type"]:
        errors.append(f"{where}: type {region['type']!r} does not fit <{control.tag}>")
    targets = control.get("toName", "").split(",")
    # Pairwise results name the Pairwise tag itself as to_name: Label Studio's editor registers
    # Pairwise as an object type and creates its result with createResult({}, {selected},
    # self, self.name) (web/libs/editor/src/tags/control/Pairwise.js); the SDK's
    # PairwiseTag.label does the same.
    allowed = [control.get("name")] if control.tag == "Pairwise" else targets
    if region["to_name"] not in allowed:
        errors.append(f"{where}: to_name {region['to_name']!r} is not one of {allowed}")
    if errors:
        return errors
    value = region["value"]
    options = [c.get("value") for c in control if c.tag in ("Label", "Choice")]
    if region["type"] in ("labels", "choices"):
        chosen = value["labels" if region["type"] == "labels" else "choices"]
        errors += [
            f"{where}: {x!r} is not a label of the config" for x in chosen if x not in options
        ]
    if region["type"] == "labels":
        text = data[objects[region["to_name"]].get("value")[1:]]
        if not 0 <= value["start"] < value["end"] <= len(text):
            errors.append(f"{where}: span outside its text")
        elif "text" in value and text[value["start"] : value["end"]] != value["text"]:
            errors.append(f"{where}: 'text' is not the text between start and end")
    if region["type"] == "ranker":
        buckets = [b.get("name") for b in control if b.tag == "Bucket"]
        items = {item.get("id") for item in data[objects[targets[0]].get("value")[1:]]}
        for bucket, ids in value["ranker"].items():
            if bucket not in buckets:
                errors.append(f"{where}: no bucket {bucket!r} in the config")
            errors += [f"{where}: {x!r} is not an item of the list" for x in ids if x not in items]
    return errors


# --- Prodigy -----------------------------------------------------------------------------------
# prodigy.ai/docs/api-interfaces ("ner_manual", "spans_manual", "choice"): a task has "text",
# "tokens" ({"text", "start", "end", "id", "ws"}: character offsets, the token's index, and
# whether one space follows it) and "spans" ({"start", "end", "token_start", "token_end",
# "label"}: character offsets and the first and LAST token, inclusive); the choice interface's
# "options" are {"id", "text"} and "accept" lists the selected option ids; every annotated task
# has "answer" "accept", "reject" or "ignore". The text must be rebuilt exactly from the tokens
# and their "ws" (support.prodi.gy/t/3421, spaCy's Token.whitespace_).

PRODIGY_TOKEN = {
    "type": "object",
    "required": ["text", "start", "end", "id"],
    "properties": {
        "text": {"type": "string", "minLength": 1},
        "start": {"type": "integer", "minimum": 0},
        "end": {"type": "integer", "minimum": 0},
        "id": {"type": "integer", "minimum": 0},
        "ws": {"type": "boolean"},
    },
}
PRODIGY_SPAN = {
    "type": "object",
    "required": ["start", "end", "token_start", "token_end", "label"],
    "properties": {
        "start": {"type": "integer", "minimum": 0},
        "end": {"type": "integer", "minimum": 0},
        "token_start": {"type": "integer", "minimum": 0},
        "token_end": {"type": "integer", "minimum": 0},
        "label": {"type": "string", "minLength": 1},
    },
}
PRODIGY_TASK = {
    "type": "object",
    "required": ["text", "tokens", "spans", "answer"],
    "properties": {
        "text": {"type": "string"},
        "tokens": {"type": "array", "items": PRODIGY_TOKEN},
        "spans": {"type": "array", "items": PRODIGY_SPAN},
        "options": {
            "type": "array",
            "items": {"type": "object", "required": ["id", "text"]},
        },
        "accept": {"type": "array"},
        "answer": {"enum": ["accept", "reject", "ignore"]},
        "meta": {"type": "object"},
        "_annotator_id": {"type": "string"},
        "_session_id": {"type": "string"},
    },
}


def check_prodigy(task: dict) -> list[str]:
    """Everything wrong with one Prodigy task line."""
    errors = validate(task, PRODIGY_TASK)
    if errors:
        return errors
    text, tokens = task["text"], task["tokens"]
    rebuilt = ""
    for i, token in enumerate(tokens):
        if token["id"] != i:
            errors.append(f"token {i} has id {token['id']}")
        if text[token["start"] : token["end"]] != token["text"]:
            errors.append(f"token {i} is not the text between its offsets")
        if token["start"] != len(rebuilt):
            errors.append(f"token {i} does not start where the previous one ended")
        rebuilt += token["text"] + (" " if token.get("ws", True) else "")
    if rebuilt != text:
        errors.append("the tokens and their 'ws' do not rebuild the text")
    for span in task["spans"]:
        first, last = span["token_start"], span["token_end"]
        if not first <= last < len(tokens):
            errors.append(f"span {span}: token indices out of order or range")
        elif (tokens[first]["start"], tokens[last]["end"]) != (span["start"], span["end"]):
            errors.append(f"span {span}: offsets are not those of its first and last token")
    option_ids = [o["id"] for o in task.get("options", [])]
    errors += [
        f"accepted {x!r} is not an option" for x in task.get("accept", []) if x not in option_ids
    ]
    return errors


# --- REDCap ------------------------------------------------------------------------------------
# Vanderbilt, "Creating a Data Dictionary in REDCap" (the data dictionary guide shipped with
# REDCap) and REDCap's data import tool: the dictionary's 18 columns in this order; the first
# variable of the first form is the record identifier, and the records file's first column;
# variable names hold only lowercase letters, numbers and underscores, begin with a letter and
# should be 26 characters or fewer (longer names are cut in some statistics-package exports);
# form (instrument) names follow the same character rules; the field types are REDCap's own;
# each instrument adds "<form>_complete" (0 Incomplete, 1 Unverified, 2 Complete) to records.

REDCAP_DICTIONARY_COLUMNS = [
    "Variable / Field Name",
    "Form Name",
    "Section Header",
    "Field Type",
    "Field Label",
    "Choices, Calculations, OR Slider Labels",
    "Field Note",
    "Text Validation Type OR Show Slider Number",
    "Text Validation Min",
    "Text Validation Max",
    "Identifier?",
    "Branching Logic (Show field only if...)",
    "Required Field?",
    "Custom Alignment",
    "Question Number (surveys only)",
    "Matrix Group Name",
    "Matrix Ranking?",
    "Field Annotation",
]
REDCAP_FIELD_TYPES = {
    "text", "notes", "dropdown", "radio", "checkbox", "yesno", "truefalse", "calc", "file",
    "slider", "descriptive", "sql",
}  # fmt: skip
REDCAP_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
REDCAP_NAME_LIMIT = 26


def read_csv(path: Path) -> list[list[str]]:
    raw = path.read_bytes()
    return list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))


def check_redcap(records_path: Path, dictionary_path: Path) -> list[str]:
    """Everything REDCap's dictionary upload or data import would refuse."""
    errors = []
    for path in (records_path, dictionary_path):
        if path.read_bytes().startswith(b"\xef\xbb\xbf"):
            errors.append(f"{path.name} starts with a byte-order mark")
    dictionary = read_csv(dictionary_path)
    if dictionary[0] != REDCAP_DICTIONARY_COLUMNS:
        return [*errors, f"the dictionary's header is {dictionary[0]}"]
    rows = [dict(zip(REDCAP_DICTIONARY_COLUMNS, r, strict=True)) for r in dictionary[1:]]
    names = [r["Variable / Field Name"] for r in rows]
    if len(set(names)) != len(names):
        errors.append("a variable name is used twice")
    for r in rows:
        name, form = r["Variable / Field Name"], r["Form Name"]
        if not REDCAP_NAME.match(name) or len(name) > REDCAP_NAME_LIMIT:
            errors.append(f"variable name {name!r} breaks REDCap's naming rules")
        if not REDCAP_NAME.match(form):
            errors.append(f"form name {form!r} breaks REDCap's naming rules")
        if r["Field Type"] not in REDCAP_FIELD_TYPES:
            errors.append(f"{name}: unknown field type {r['Field Type']!r}")
        if r["Field Type"] in ("text", "notes") and r["Choices, Calculations, OR Slider Labels"]:
            errors.append(f"{name}: a text field has choices")
        if r["Field Type"] != "text" and r["Text Validation Type OR Show Slider Number"]:
            errors.append(f"{name}: validation on a field that is not text")
        if not r["Field Label"].strip():
            errors.append(f"{name}: no field label")
    records = read_csv(records_path)
    header = records[0]
    forms = {r["Form Name"] for r in rows}
    if header[0] != names[0]:
        errors.append("the records' first column is not the record id (the first variable)")
    allowed = set(names) | {f"{f}_complete" for f in forms}
    errors += [f"records column {c!r} is not a field" for c in header if c not in allowed]
    ids = [r[0] for r in records[1:]]
    if len(set(ids)) != len(ids):
        errors.append("a record id is used twice")
    for number, r in enumerate(records[1:], start=2):
        if len(r) != len(header):
            errors.append(f"records row {number} has {len(r)} values for {len(header)} columns")
            continue
        for column, value in zip(header, r, strict=True):
            if column.endswith("_complete") and value not in ("0", "1", "2"):
                errors.append(f"records row {number}: {column} is {value!r}")
    return errors
