import subprocess
import sys

from stsq_learn import __version__
from stsq_learn.cli import main


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert __version__ in capsys.readouterr().out


def test_help_without_command(capsys):
    assert main([]) == 0
    assert "stsq-learn" in capsys.readouterr().out


def test_module_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "stsq_learn", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and __version__ in out.stdout
