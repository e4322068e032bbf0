"""The documentation stays true: every complete kernel example (```hk blocks of
docs/*.md, and the kernels of README.md) builds and passes `hopperc check`, and an
example followed by a ```text block showing an error fails with exactly that message;
every shell command of README.md and docs/*.md runs as written, or is classified in
CLASSIFIED with the reason it cannot run here; the make and ninja rules build both
outputs of a kernel when pasted into an empty directory beside `kernels/`.

`check` runs here with a small schedule budget (2 seeds, 40 search runs, where the
command's defaults take some minutes over all the examples); what the examples got
wrong before (a read of shared memory nothing wrote, an mbarrier invalidated while
threads waited on it) is found in the first schedule."""
from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from tests.conftest import ROOT

FENCED = re.compile(r"```(\w*)\n(.*?)```", re.S)
KERNEL = re.compile(r"(?:\s*#[^\n]*\n)*\s*kernel (\w+)\(")
SEEDS, SEARCH = 2, 40


def _examples():
    pages = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    for page in pages:
        blocks = [(m.group(1), m.group(2)) for m in FENCED.finditer(page.read_text())]
        for i, (lang, text) in enumerate(blocks):
            # The README quotes its kernel in a plain block; docs mark theirs `hk`.
            kernel = KERNEL.match(text)
            if not (lang == "hk" or (page.name == "README.md" and lang == "")) or not kernel:
                continue
            after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
            error = after[1] if after[0] == "text" and ": error: " in after[1] else None
            yield pytest.param(text, error, id=f"{page.stem}-{kernel.group(1)}-{i}")


EXAMPLES = list(_examples())


def test_the_readme_kernel_is_among_the_examples():
    assert any(p.id.startswith("README-scale_rows") for p in EXAMPLES)


def test_the_readme_python_calls_pass_its_kernels_arguments(tmp_path, monkeypatch):
    """`kernel.hk` is the README's scale_rows: its `hopperc.simulate` call runs as
    written on arrays named as the README names them, and its `hopperc.compile`
    call passes one tensor per parameter, in order."""
    import numpy as np

    import hopperc

    readme = (ROOT / "README.md").read_text()
    kernel = next(p.values[0] for p in EXAMPLES if p.id.startswith("README-scale_rows"))
    (tmp_path / "kernel.hk").write_text(kernel)
    monkeypatch.chdir(tmp_path)
    call = re.search(r'`(hopperc\.simulate\("kernel\.hk".*?)`', readme, re.S).group(1)
    out = eval(call, {"hopperc": hopperc, "x": np.ones((64, 64)), "s": np.full(64, 2.0)})
    assert np.array_equal(out.astype(np.float64), np.full((64, 64), 2.0))
    params = re.findall(r"(\w+): \w+\[", re.search(r"kernel scale_rows\((.*?)\)", kernel).group(1))
    launched = re.search(r'hopperc\.compile\("kernel\.hk"\)\((.*?)\)', readme).group(1)
    assert launched.split(", ") == [p.lower() for p in params]


@pytest.mark.parametrize("text,error", EXAMPLES)
def test_documented_example(text, error):
    source = SourceFile("doc.hk", text)
    if error is not None:
        with pytest.raises(CompileError) as info:
            driver.build(source)
        assert info.value.message in error
        return
    driver.build(source)
    report = driver.simulate(source, seeds=SEEDS, search=SEARCH)
    assert report.ok, [line for f in report.findings for line in f.lines()]


# ---------------------------------------------------------------- shell commands
# Which commands are taken from a page: every line of a ```sh / bash / shell block,
# the `$ ` lines of a ```console block (the lines after one are its output), and the
# lines of a plain ``` block that start with a command below (optionally after `$ `).
SHELL_BLOCKS = {"sh", "bash", "shell", "console"}
# a plain block's line is a command when it starts with one of these words (not, e.g.,
# `hopperc.build(...)`, a signature)
COMMAND_WORDS = ("hopperc ", "make ", "pip ", "ninja ", "python ")

# Commands that cannot run here, by form (a regular expression the whole command
# matches, comment removed): kind, and why. A documented command that neither runs
# nor matches a line here fails, so a new form of command is classified on purpose.
CLASSIFIED = [
    (r"make (build|test)", "network",
     "creates .venv and installs hopperc's dependencies from the package index (make test "
     "then runs the whole suite, minutes)"),
    (r"pip install .*", "network",
     "resolves the dependencies from the package index; tests/test_install.py installs the "
     "wheel with --no-deps"),
    (r"pip wheel \. -w dist/", "network",
     "pip's build isolation fetches the build backend; tests/test_install.py builds the "
     "wheel with --no-build-isolation"),
    (r"hopperc (run|bench) .*", "gpu",
     "launches on a GPU; here the kernel, its -D and --shape are checked as sim checks them"),
]

# The files the commands name (placeholders included), made in the directory they run
# in: `kernel.hk` is the README's scale_rows; `samples` is the repository's. A value is
# a file to copy, a text, or a function that writes the path it is given (data files).
FIXTURES = {
    "kernel.hk": ROOT / "samples" / "scale_rows.hk",
    "k.hk": ROOT / "samples" / "scale_rows.hk",
    "lib/scale_rows.hk": ROOT / "samples" / "scale_rows.hk",
    "kernels.toml": '[[kernel]]\nsource = "kernel.hk"\n',
    "in.npz": lambda path: _scale_rows_inputs(path),
}
LINKS = {"samples": ROOT / "samples"}
# Variables the commands read, relative to the directory they run in.
VARIABLES = {"CI_CACHE": "ci-cache"}


def _scale_rows_inputs(path: Path) -> None:
    """Arrays for `kernel.hk` (scale_rows) as `hopperc sim --inputs` reads them."""
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(path, X=rng.standard_normal((64, 64)), S=rng.standard_normal(64))


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str  # the command as written: prompt and comment removed, continuations joined
    exports: tuple[tuple[str, str], ...]  # `export NAME=VALUE` lines before it in its block
    output: str | None  # what a console block shows it printing


def _strip_comment(line: str) -> str:
    """`line` without a `#` comment (one after whitespace, outside quotes)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _block_commands(page: str, first_line: int, lang: str, body: str):
    lines = body.split("\n")
    exports: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        start, raw = i, lines[i].strip()  # a block in a list item is indented
        i += 1
        prompt = raw.startswith("$ ")
        text = raw[2:] if prompt else raw
        if lang == "console" and not prompt:
            continue
        if lang not in SHELL_BLOCKS and not text.startswith(COMMAND_WORDS):
            continue
        while text.endswith("\\") and i < len(lines):
            text = text[:-1] + " " + lines[i].strip()
            i += 1
        text = " ".join(_strip_comment(text).split())
        if not text:
            continue
        output = None
        if prompt:
            shown = []
            while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith("$ "):
                shown.append(lines[i].strip())
                i += 1
            output = "\n".join(shown)
        if text.startswith("export "):
            name, _, value = text.removeprefix("export ").partition("=")
            exports.append((name, value))
            continue
        yield Command(page, first_line + start, text, tuple(exports), output)


def _commands() -> list[Command]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        for match in FENCED.finditer(text):
            lang, body = match.group(1), match.group(2)
            if lang in SHELL_BLOCKS or lang == "":
                first = text.count("\n", 0, match.start()) + 2
                found.extend(_block_commands(name, first, lang, body))
    return found


COMMANDS = _commands()


def _classified(command: Command):
    return next(((kind, why) for pattern, kind, why in CLASSIFIED
                 if re.fullmatch(pattern, command.text)), None)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One directory with the fixtures, and one build cache, for every command."""
    root = tmp_path_factory.mktemp("docs")
    for name, content in FIXTURES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(content, path)
        elif isinstance(content, str):
            path.write_text(content)
        else:
            content(path)
    for name, target in LINKS.items():
        (root / name).symlink_to(target)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOPPERC_CACHE_DIR", str(root / "cache"))
        yield root


def _expand(text: str, variables: dict[str, str]) -> list[str]:
    """The words of `text` as a POSIX shell would give them, for the forms the docs
    use: `$NAME` / `${NAME}`, `$(nproc)`, quotes, and globs."""
    text = text.replace("$(nproc)", str(len(os.sched_getaffinity(0))))
    assert "$(" not in text and "`" not in text, f"unsupported substitution in {text!r}"

    def variable(match: re.Match) -> str:
        assert match.group(1) in variables, f"${match.group(1)}: add it to VARIABLES"
        return variables[match.group(1)]
    words = shlex.split(re.sub(r"\$\{?(\w+)\}?", variable, text))
    unsupported = {"|", "||", "&&", ";", "<", ">>", "&"} & set(words)
    assert not unsupported, f"unsupported shell syntax {unsupported} in {text!r}"
    expanded = []
    for word in words:
        matches = sorted(glob.glob(word)) if "*" in word else []
        expanded.extend(matches or [word])
    return expanded


def _run_hopperc(args: list[str], env: dict[str, str]):
    """`hopperc ARGS` in this process (a subprocess would cost ~0.5 s each); check and
    sim with 2 seeds, 40 search runs and no worker processes."""
    from click.testing import CliRunner

    from hopperc import target
    from hopperc.cli import main

    if args[:1] in (["check"], ["sim"]):
        args = [*args, "-j", "1"] + (["--seeds", "2", "--search", "40"] if args[0] == "sim" else [])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(target, "DEFAULT_SEEDS", 2)
        patch.setattr(target, "DEFAULT_SEARCH", 40)
        return CliRunner().invoke(main, args, env=env)


def _check_without_gpu(args: list[str]) -> None:
    """A GPU command's kernel builds with its -D, and its --shape names its dimensions."""
    from hopperc.cli.common import parse_shape
    from hopperc.diagnostics import read_source

    options = [a for a in args[1:] if a.startswith("-")]
    assert set(options) <= {"--shape", "-D"}, f"options this check does not know: {options}"
    file = args[1]
    shapes = parse_shape(None, None, args[args.index("--shape") + 1]) if "--shape" in args else {}
    defines = {}
    for i, arg in enumerate(args):
        if arg == "-D":
            name, _, value = args[i + 1].partition("=")
            defines[name] = int(value)
    driver.problem_dims(driver.check(read_source(file), defines), shapes, file)


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.page}:{c.line}" for c in COMMANDS])
def test_documented_command(command: Command, workdir: Path, monkeypatch) -> None:
    monkeypatch.chdir(workdir)
    variables = {name: str(workdir / value) for name, value in VARIABLES.items()}
    env = {}
    for name, value in command.exports:
        env[name] = variables[name] = " ".join(_expand(value, variables))
    words = _expand(command.text, variables)
    classified = _classified(command)
    if classified is not None:
        kind, why = classified
        if kind == "gpu" and words[0] == "hopperc":
            _check_without_gpu(words[1:])
        pytest.skip(f"needs {kind}: {why}")
    if words[0] == "python":  # a data file's preparation, as a user runs it
        done = subprocess.run([sys.executable, *words[1:]], cwd=workdir, capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{command.text}\n{done.stderr}"
        return
    assert words[0] == "hopperc", (f"{command.page}:{command.line}: no way to run "
                                   f"{command.text!r} here: classify it in CLASSIFIED")
    redirect = words.index(">") if ">" in words else None
    args = words[1:redirect]
    result = _run_hopperc(args, env)
    assert result.exit_code == 0, f"{command.text}\n{result.output}"
    if redirect is not None:
        (workdir / words[redirect + 1]).write_text(result.stdout)
    if command.output is not None:
        assert result.stdout.rstrip("\n") == command.output, command.text


def test_every_classification_is_used() -> None:
    """A form no page documents any more leaves the table."""
    for pattern, _kind, _why in CLASSIFIED:
        assert any(re.fullmatch(pattern, c.text) for c in COMMANDS), pattern


def test_the_commands_are_found() -> None:
    texts = {c.text for c in COMMANDS}
    assert "hopperc --version" in texts and "pip install ." in texts
    ci = next(c for c in COMMANDS if c.page == "README.md" and "--manifest" in c.text)
    assert ci.exports == (("HOPPERC_CACHE_DIR", '"$CI_CACHE/hopperc"'),)
    assert ci.text.endswith("--diagnostics sarif > hopperc.diagnostics.sarif")


# ---------------------------------------------------------------- make and ninja
def _rule_blocks(lang: str) -> list[str]:
    """The distinct ```make or ```ninja blocks of the pages."""
    blocks = []
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        blocks += [m.group(2) for m in FENCED.finditer(page.read_text())
                   if m.group(1) == lang and m.group(2) not in blocks]
    return blocks


@pytest.fixture
def beside_kernels(tmp_path, workdir):
    """An empty directory but for kernels/scale_rows.hk, with `hopperc` on PATH."""
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(ROOT / "samples" / "scale_rows.hk", kernels)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "hopperc"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m hopperc "$@"\n')
    script.chmod(0o755)
    path = os.pathsep.join([str(bin_dir), os.environ["PATH"]])
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PATH": path, "PYTHONPATH": python_path}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    return tmp_path, run


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("makefile", _rule_blocks("make"))
def test_make_rule_as_pasted(makefile: str, beside_kernels) -> None:
    """Pasted into an empty directory beside kernels/, `make` builds each kernel's
    cubin and JSON; a missing JSON or an edited kernel is out of date."""
    root, run = beside_kernels
    (root / "Makefile").write_text(makefile)
    proc = run("make")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {p.name for p in (root / "build").iterdir()} == {
        "scale_rows.cubin", "scale_rows.json", "scale_rows.d"}
    assert run("make", "-q").returncode == 0
    (root / "build" / "scale_rows.json").unlink()
    assert run("make", "-q").returncode == 1


@pytest.mark.skipif(shutil.which("ninja") is None, reason="no ninja")
@pytest.mark.parametrize("rules", _rule_blocks("ninja"))
def test_ninja_rule_declares_both_outputs(rules: str, beside_kernels) -> None:
    root, run = beside_kernels
    (root / "build.ninja").write_text(rules)
    proc = run("ninja")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "build" / "scale_rows.cubin").exists()
    assert "no work to do" in run("ninja", "-n").stdout
    (root / "build" / "scale_rows.json").unlink()
    assert "hopperc build" in run("ninja", "-n").stdout


def test_a_gpu_command_with_a_dimension_its_kernel_lacks_fails(workdir, monkeypatch) -> None:
    """What the README's `run` line once did: a K that scale_rows does not have."""
    from hopperc.diagnostics import CompileError

    monkeypatch.chdir(workdir)
    with pytest.raises(CompileError, match="no dimension 'K'"):
        _check_without_gpu(["run", "kernel.hk", "--shape", "M=1000,N=1000,K=1000"])
