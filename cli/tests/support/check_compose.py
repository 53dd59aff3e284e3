#!/usr/bin/python3
"""Validates a compose file against the Compose Specification's JSON schema.

Usage: check_compose.py SCHEMA COMPOSE_FILE
Prints each violation (path: message) and exits 1 if there is any; exits 0 when valid.
Uses Debian's python3-jsonschema and python3-yaml (scripts/test-packages).
"""
import json
import sys

import jsonschema
import yaml


def main():
    schema_path, compose_path = sys.argv[1], sys.argv[2]
    with open(schema_path) as f:
        schema = json.load(f)
    with open(compose_path) as f:
        compose = yaml.safe_load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.absolute_path))
    for e in errors:
        path = "/".join(str(p) for p in e.absolute_path) or "(top)"
        print(f"{path}: {e.message}")
    # The document as read (anchors and merge keys resolved), for the caller's own checks.
    print(json.dumps(compose), file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
