"""MkDocs hook: render the reference pages generated from the code (scenario schema, CLI commands)."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files


def on_files(files: Files, config: Any) -> Files:
    from commsched._docgen import cli_reference, scenario_reference

    for uri, text in (("reference/scenario.md", scenario_reference()), ("reference/cli.md", cli_reference())):
        files.append(File.generated(config, uri, content=text))
    return files
