"""Processes, ports and files of the development metastore: starting a detached server, signalling
it, finding Java, writing state files. No metastore knowledge here (see :mod:`.launcher`)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tableswap.devmetastore.backend import DevMetastoreError

# The server is started through a throw-away /bin/sh that backgrounds java and prints its
# pid, so java is *not* a child of the calling Python process: it outlives it (CLI use), never
# lingers as our zombie after stop() (in-process use) and Python never warns about a
# "subprocess still running".  The shell is a new session leader (start_new_session), so
# the server ignores the caller terminal's Ctrl-C and hang-up.
DETACH_SCRIPT = '"$@" </dev/null >&2 & echo $!'
#: Installing Java, for messages.
_INSTALL_JAVA = "`apt-get install openjdk-17-jre-headless`"


def spawn_detached(command: list[str], cwd: Path, env: dict[str, str], log: IO[bytes]) -> tuple[int | None, str]:
    """Run ``command`` in the background (stdout+stderr to ``log``, a new session); return its pid
    (``None`` if the launcher shell printed none) and what the shell said (for the error)."""
    try:
        shell = subprocess.Popen(["/bin/sh", "-c", DETACH_SCRIPT, "sh", *command], cwd=cwd,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                 start_new_session=True, close_fds=True, env=env)
        out, _ = shell.communicate(timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise DevMetastoreError(f"could not run {command[0]!r}: {exc}") from exc
    try:
        return int(out.decode().strip()), ""
    except ValueError:
        return None, f"launcher shell exited with code {shell.returncode} and printed {out!r}"


def run_logged(command: list[str], cwd: Path, env: dict[str, str], log_file: Path, title: str) -> tuple[int, int]:
    """Run ``command`` to its end with its output appended to ``log_file`` under a ``title`` line;
    return its exit code and where its output starts in the log."""
    with open(log_file, "ab") as log:
        offset = log.tell()
        log.write(f"\n===== {title} {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n{shell_join(command)}\n".encode())
        log.flush()
        done = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                              timeout=600, check=False)
    return done.returncode, offset


def wait_ready(pid: int | None, host: str, port: int, uri: str, deadline: float,
               probe: Callable[[str], None] | None, fail: Callable[[str], Exception]) -> None:
    """Wait until the server ``pid`` accepts connections on ``port`` and ``probe(uri)`` passes; raise
    ``fail(reason)`` if it exits first or ``deadline`` (monotonic) passes."""
    last_probe_error: BaseException | None = None
    port_seen = False
    while True:
        if pid is not None and not pid_alive(pid):
            raise fail(f"the development metastore (pid {pid}) exited during startup")
        if port_seen or port_open(host, port):
            port_seen = True
            if probe is None:
                return
            try:
                probe(uri)
                return
            except Exception as exc:  # noqa: BLE001 - the probe decides what "ready" means
                last_probe_error = exc
        if time.monotonic() >= deadline:
            what = (f"port {port} did not accept connections" if not port_seen
                    else f"the readiness probe kept failing (last error: {last_probe_error!r})")
            raise fail(f"the development metastore was not ready in time: {what}")
        time.sleep(0.25)


def failure(log_file: Path, message: str, log_offset: int | None, lines: int = 30) -> DevMetastoreError:
    """``message`` with the last ``lines`` of the server's log since ``log_offset`` (and a hint when
    the log shows a Java too old for the jars)."""
    tail_text = tail(log_file, lines, log_offset)
    if "UnsupportedClassVersionError" in tail(log_file, 10_000, log_offset):
        message += ("\nhint: the java in use is too old; the Hive/Spark jars need Java 17 or "
                    "newer (set JAVA_HOME to a Java 17 installation)")
    text = f"{message}\n--- last lines of {log_file} ---\n{tail_text}".rstrip()
    return DevMetastoreError(f"{text}\n--- full log: {log_file} ---")


def terminate(pid: int, timeout: float) -> None:
    """SIGTERM the process (its group), wait up to ``timeout`` seconds, then SIGKILL."""
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)


def signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        # The server leads its own session (start_new_session=True): signal the group.
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def child_env() -> dict[str, str]:
    """The caller's environment without what would change the server's configuration."""
    env = dict(os.environ)
    for name in ("CLASSPATH", "HADOOP_CONF_DIR", "HIVE_CONF_DIR"):
        env.pop(name, None)
    return env


def find_java(explicit: str | None) -> str:
    """``explicit`` (a path or a name on PATH), else ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    if explicit:
        candidate = shutil.which(explicit) or explicit
        if not os.path.isfile(candidate) or not os.access(candidate, os.X_OK):
            raise DevMetastoreError(f"java executable {explicit!r} not found; install Java 17 (e.g. {_INSTALL_JAVA})")
        return candidate
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
        raise DevMetastoreError(
            f"JAVA_HOME={java_home} has no bin/java; point JAVA_HOME at a Java 17 "
            "installation or unset it to use `java` from PATH"
        )
    found = shutil.which("java")
    if found is None:
        raise DevMetastoreError(
            "no `java` found (JAVA_HOME is unset and `java` is not on PATH); the "
            f"development metastore needs Java 17: install it (e.g. {_INSTALL_JAVA} "
            "or `brew install openjdk@17`) or set JAVA_HOME"
        )
    return found


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def java_major_version(java: str) -> int | None:
    """The feature release of ``java`` (8, 11, 17, 25...) from ``java -version``; None if unknown."""
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0_402" is Java 8


def check_java(java: str, minimum: int, what: str, *, maximum: int | None = None, why_newest: str = "") -> None:
    """Refuse a ``java`` outside ``minimum``..``maximum`` (an unknown version passes: the server says)."""
    found = java_major_version(java)
    install = (f"set JAVA_HOME to a Java {max(minimum, 17)} installation "
               "(e.g. `apt-get install openjdk-17-jre-headless`)")
    if found is not None and found < minimum:
        raise DevMetastoreError(f"{java} is Java {found}, too old for {what}, which needs Java {minimum} or newer: "
                                f"{install}")
    if found is not None and maximum is not None and found > maximum:
        raise DevMetastoreError(f"{java} is Java {found}, too new for {what}, which runs on Java {maximum} at the "
                                f"newest{why_newest}: {install}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by init) still answers kill(pid, 0); treat it as dead.
    # Careful: the leader of a multi-threaded process shows "Z" as soon as its main thread
    # is done while the other threads still run, so also require that no thread is left.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            return True
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except (OSError, IndexError):
        return True


def process_cmdline(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return raw.replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return ""  # /proc works, the process is gone
    except OSError:
        return None
    if sys.platform == "win32":  # pragma: no cover
        return None
    try:
        out = subprocess.run(
            ["ps", "-ww", "-o", "command=", "-p", str(pid)],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def port_bindable(port: int) -> bool:
    # HMS 2.3 binds the wildcard address, so check that one.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def write_atomic(path: Path, text: str, private: bool = False) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if private:
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        tmp.write_text(text)
    os.replace(tmp, path)


def tail(path: Path, lines: int, offset: int | None) -> str:
    try:
        with open(path, "rb") as handle:
            if offset:
                handle.seek(offset)
            last = deque(handle, maxlen=lines)
    except OSError as exc:
        return f"(log not readable: {exc})"
    return b"".join(last).decode(errors="replace")


def shell_join(command: list[str]) -> str:
    return shlex.join(command)
