"""A file's kind from its name: the fence language its text is shown in (CommonMark info
strings highlighters know), or a document format read by its own library."""

from __future__ import annotations

from pathlib import PurePath

DOCUMENTS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html",
             ".xhtml": "html"}

LANGUAGES = {
    ".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "rst",
    ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "json", ".yaml": "yaml",
    ".yml": "yaml", ".toml": "toml", ".ini": "ini", ".xml": "xml", ".py": "python",
    ".js": "javascript", ".mjs": "javascript", ".ts": "typescript", ".tsx": "tsx",
    ".jsx": "jsx", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp",
    ".rs": "rust", ".go": "go", ".java": "java", ".kt": "kotlin", ".swift": "swift",
    ".rb": "ruby", ".php": "php", ".cs": "csharp", ".sh": "bash", ".bash": "bash",
    ".zsh": "bash", ".sql": "sql", ".css": "css", ".scss": "scss", ".lua": "lua",
    ".r": "r", ".m": "objectivec", ".scala": "scala", ".hs": "haskell", ".ex": "elixir",
    ".tex": "latex", ".diff": "diff", ".patch": "diff", ".cmake": "cmake",
}


def kind_of(path: PurePath) -> str:
    """'pdf' / 'docx' / 'html' for documents, else a fence language ('text' if unknown)."""
    suffix = path.suffix.lower()
    if suffix in DOCUMENTS:
        return DOCUMENTS[suffix]
    if path.name in ("Makefile", "Dockerfile", "CMakeLists.txt"):
        return {"Makefile": "make", "Dockerfile": "dockerfile"}.get(path.name, "cmake")
    return LANGUAGES.get(suffix, "text")
