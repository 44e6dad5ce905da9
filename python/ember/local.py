# Copyright 2026 The Ember Authors.
"""LocalCluster: a whole Ember cluster of real processes on loopback.

For tests, examples and benchmarks: an ember-coordinator, N ember-ps shards and, on
request, ember-serving followers, each a child process of this interpreter, started
as deploy/local/cluster.sh starts them (tests/support/local_cluster.h is the C++
tests' twin). Nothing is mocked; only the Python standard library is used.

    from ember.local import LocalCluster

    with LocalCluster(shards=2) as cluster:      # start(): every shard owns its slots
        print(cluster.coordinator)               # "127.0.0.1:PORT"
        cluster.kill_shard(1)                    # SIGKILL: a crash
        cluster.restart_shard(1)                 # same id, data and port; serves again
        follower = cluster.start_serving()       # an ember-serving follower's address
    # stop(): every process is gone, the temporary root is removed

Processes and their flags (the flags every start shares; the caller's come after
them, and the binaries keep the last value of a repeated flag):

    coordinator  --data_dir=ROOT/data/coordinator --port=P --expected_shards=N
                 --checkpoint_dir=CHECKPOINTS --admin_token_file=ROOT/admin_token
                 --metrics_port=0                      then coordinator_flags
    ps-i         --data_dir=ROOT/data/ps-i --port=P --shard_id=i
                 --coordinator=ADDRESS --admin_token_file=... --metrics_port=0
                                                       then ps_flags
    serving-i    --coordinator=ADDRESS --checkpoint_dir=CHECKPOINTS
                 --data_dir=ROOT/data/serving-i --port=P
                 --admin_token_file=... --metrics_port=0   then start_serving's flags

P is 0 (the kernel picks a free port) at a process's first start and its previous
port at a restart, so the coordinator and clients that know an address reach the
restarted process there. Shard i always runs as --shard_id=i on ROOT/data/ps-i: the
coordinator gives a restarted shard its slots back.

Readiness. Each server prints "listening on HOST:PORT" and then "metrics on
HOST:PORT" to stdout once it serves; both go, with its stderr log, to
ROOT/logs/NAME.log (appended to across restarts), and are read from there. A
cluster is ready (wait_ready) when the coordinator's metrics show a slot map epoch
above 0 and every shard that should run ALIVE, and each such shard's metrics show
that it routes by that epoch: slots are assigned and known everywhere (the check of
the C++ LocalCluster::WaitForSlots, over HTTP). A follower is ready at its listening
line (printed once it has bootstrapped) or, on request, once its metrics say it
follows every shard.

Stopping. stop() sends SIGTERM to every process it started (followers, then shards,
then the coordinator), SIGKILL to those still running after `stop_grace` seconds,
and reaps them; it also runs at interpreter exit (atexit). Processes started from
the main thread also get SIGKILL from the kernel if this interpreter dies without
running atexit (setpriv --pdeathsig, where util-linux provides it). Children stay in
this process group, so Ctrl-C reaches them too. Nothing is found or killed by name.

Thread-safety: one thread at a time.
"""

import atexit
import collections
import http.client
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

__all__ = ["LocalCluster", "find_bin_dir"]

_REQUIRED_BINARIES = ("ember-coordinator", "ember-ps")
_POLL_S = 0.05           # between two looks at a log or at the metrics
_SCRAPE_TIMEOUT_S = 2.0  # one metrics request
_KILL_WAIT_S = 30.0      # reaping a SIGKILLed process (it cannot ignore it; bounded anyway)

# Loopback metrics requests never go through an HTTP proxy from the environment.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# What a metrics request raises while a server is not (or no longer) up; URLError and
# timeouts are OSErrors.
_SCRAPE_ERRORS = (OSError, http.client.HTTPException)


def find_bin_dir(bin_dir=None):
    """Returns the directory that holds ember-coordinator and ember-ps.

    `bin_dir` when given; else $EMBER_BIN when set; else the first of
    <this file's dir>/../../bin (the package copied to build/python/ember: build/bin)
    and the repository's build/bin that holds ember-coordinator. Raises
    FileNotFoundError naming every path tried (and the binary missing there).
    """
    if bin_dir is not None:
        candidates = [str(bin_dir)]
    elif os.environ.get("EMBER_BIN"):
        candidates = [os.environ["EMBER_BIN"]]
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        candidates = [os.path.normpath(os.path.join(here, "..", "..", "bin")),
                      os.path.normpath(os.path.join(here, "..", "..", "build", "bin"))]
    missing = []
    for directory in candidates:
        absent = [b for b in _REQUIRED_BINARIES
                  if not os.access(os.path.join(directory, b), os.X_OK)]
        if not absent:
            return os.path.abspath(directory)
        missing.append(f"{directory} (no {', '.join(absent)})")
    raise FileNotFoundError(
        "Ember binaries not found in " + "; ".join(missing) +
        ": build first (cmake --build build) or pass bin_dir / set EMBER_BIN")


def _scrape(address):
    """The samples of http://ADDRESS/metrics: {'name' or 'name{labels}': value}.

    Raises one of _SCRAPE_ERRORS when the server does not answer.
    """
    with _HTTP.open(f"http://{address}/metrics", timeout=_SCRAPE_TIMEOUT_S) as response:
        text = response.read().decode("utf-8", "replace")
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        end = line.find("}") + 1 if "{" in line else line.find(" ")
        fields = line[end:].split()
        if end <= 0 or not fields:
            continue
        try:
            samples[line[:end].strip()] = float(fields[0])
        except ValueError:
            pass
    return samples


def _flag_list(flags, what):
    """`flags` as a list of strings; TypeError for a bare string (a common slip)."""
    if isinstance(flags, (str, bytes)):
        raise TypeError(f"{what} must be a sequence of flags, not a string: {flags!r}")
    return [str(f) for f in flags]


def _port_of(address):
    return int(address.rsplit(":", 1)[1])


class _Process:
    """One child: started with stdout and stderr appended to `log_path`."""

    def __init__(self, name, log_path):
        self.name = name
        self.log_path = log_path
        self.popen = None
        self.wanted = False   # started and neither killed nor stopped here since
        self.address = None   # from the ready lines of the latest start
        self.metrics = None
        self._log_start = 0

    @property
    def pid(self):
        return self.popen.pid if self.popen is not None else None

    @property
    def running(self):
        """True from start until the process has exited (and was reaped here)."""
        return self.popen is not None and self.popen.poll() is None

    def start(self, argv, cwd):
        # Only the lines after this offset belong to this start.
        self._log_start = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        if threading.current_thread() is threading.main_thread() and shutil.which("setpriv"):
            # The kernel kills the child if this interpreter dies without stopping it.
            # PDEATHSIG follows the thread that forked, hence the main thread only.
            argv = ["setpriv", "--pdeathsig", "KILL", "--"] + argv
        self.wanted = True
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, cwd=cwd, close_fds=True)

    def await_lines(self, prefixes, deadline):
        """Waits for a line starting with each of `prefixes` in this start's log.

        Returns {prefix: the rest of its first line}. Raises RuntimeError (with the
        log's tail) if the process exits first or `deadline` (time.monotonic) passes.
        """
        found = {}
        offset, pending = self._log_start, b""
        while True:
            exited = self.popen.poll() is not None  # before reading: no line is missed
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                chunk = log.read()
            offset += len(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                text = line.decode("utf-8", "replace")
                for prefix in prefixes:
                    if prefix not in found and text.startswith(prefix):
                        found[prefix] = text[len(prefix):].strip()
            waiting = [p for p in prefixes if p not in found]
            if not waiting:
                return found
            if exited:
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode} before "
                                   f"printing {waiting[0]!r}; {self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} (pid {self.pid}) printed no {waiting[0]!r} "
                                   f"line in time; {self.tail()}")
            time.sleep(_POLL_S)

    def signal(self, sig):
        if self.running:
            self.popen.send_signal(sig)

    def wait(self, timeout):
        """Its return code once reaped (-N: signal N), or None if it still runs."""
        try:
            return self.popen.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None

    def tail(self, lines=40):
        return f"last lines of {self.log_path}:\n{_tail(self.log_path, lines)}"


def _tail(path, lines):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return "".join(collections.deque(f, maxlen=lines))
    except FileNotFoundError:
        return ""


# Clusters with processes that may still run; stopped at interpreter exit.
_LIVE = set()


@atexit.register
def _stop_live_clusters():
    for cluster in list(_LIVE):
        try:
            cluster.stop()
        except Exception:  # one cluster's failure must not leave the others running
            pass


class LocalCluster:
    """A coordinator and `shards` PS shards on loopback (see the module docstring).

    Args:
      shards: the coordinator's --expected_shards and the shards start() starts (ids
        0..shards-1).
      root: directory of data (ROOT/data/NAME), logs (ROOT/logs/NAME.log) and the admin
        token. Default: a fresh temporary directory, removed by stop() unless `keep`
        (or unless start() failed: its logs stay for a look).
      bin_dir: where the binaries are; see find_bin_dir. FileNotFoundError here if
        ember-coordinator or ember-ps is missing.
      checkpoint_dir: the coordinator's (and followers') --checkpoint_dir. Default:
        ROOT/checkpoints.
      coordinator_flags, ps_flags: extra flags for every start (restarts too) of
        the coordinator / of each shard, e.g. ("--heartbeat_timeout_ms=1000",).
        Readiness reads the metrics: --metrics_port=-1 there makes start() time out.
      start_timeout: seconds start() and each restart may take in all, and
        start_serving by default.
      log: a callable taking one progress line (print, logger.info); None: quiet.
      keep: keep the temporary root after stop().
      stop_grace: seconds between SIGTERM and SIGKILL in stop().
    """

    def __init__(self, shards=1, root=None, bin_dir=None, checkpoint_dir=None,
                 coordinator_flags=(), ps_flags=(), start_timeout=60.0, log=None, *,
                 keep=False, stop_grace=5.0):
        if not isinstance(shards, int) or shards < 1:
            raise ValueError(f"shards must be an int >= 1, got {shards!r}")
        self.bin_dir = find_bin_dir(bin_dir)
        self.shards = shards
        self.coordinator_flags = _flag_list(coordinator_flags, "coordinator_flags")
        self.ps_flags = _flag_list(ps_flags, "ps_flags")
        self.start_timeout = float(start_timeout)
        self.stop_grace = float(stop_grace)
        self._log = log
        self._owns_root = root is None
        self._keep_root = keep
        self.root = os.path.abspath(tempfile.mkdtemp(prefix="ember-local-") if root is None
                                    else os.fspath(root))
        self.checkpoint_dir = os.path.abspath(
            os.fspath(checkpoint_dir) if checkpoint_dir is not None
            else os.path.join(self.root, "checkpoints"))
        self.admin_token_file = os.path.join(self.root, "admin_token")
        self.coordinator = None       # "127.0.0.1:PORT" once started
        self.coordinator_metrics = None
        self.shard_addresses = {}     # shard index -> "127.0.0.1:PORT" (kept while it is down)
        self.shard_metrics = {}
        self.serving_addresses = {}   # follower index -> "127.0.0.1:PORT"
        self._coordinator = None      # _Process
        self._shards = {}             # index -> _Process
        self._serving = {}

    def __repr__(self):
        return (f"LocalCluster(coordinator={self.coordinator!r}, "
                f"shards={self.shard_addresses!r}, root={self.root!r})")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    # --- starting -----------------------------------------------------------------

    def start(self):
        """Starts the coordinator, then every shard, and waits until the cluster is
        ready (wait_ready). Returns self.

        Raises RuntimeError, with the failing process's log tail, if a process exits
        or the cluster is not ready within start_timeout; every process started is
        stopped again then (the logs stay). RuntimeError if already started.
        """
        if self._coordinator is not None and self._coordinator.running:
            raise RuntimeError(f"the cluster already runs (coordinator {self.coordinator})")
        deadline = time.monotonic() + self.start_timeout
        for sub in ("logs", "data"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        if not os.path.exists(self.admin_token_file):
            # The credential emberctl needs for admin calls; kept across restarts.
            fd = os.open(self.admin_token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(16))
        _LIVE.add(self)
        try:
            self._start_coordinator(port=0, deadline=deadline)
            for i in range(self.shards):  # all at once, then wait for each
                self._spawn_shard(i, port=0)
            for i in range(self.shards):
                self._await_shard(i, deadline)
            self._wait_ready(deadline)
        except BaseException:
            self._keep_root = True  # its logs explain the failure
            self.stop()
            raise
        return self

    def _spawn(self, name, binary, args):
        proc = _Process(name, os.path.join(self.root, "logs", f"{name}.log"))
        proc.start([os.path.join(self.bin_dir, binary)] + args, cwd=self.root)
        return proc

    def _await_server(self, proc, deadline):
        lines = proc.await_lines(("listening on ", "metrics on "), deadline)
        proc.address, proc.metrics = lines["listening on "], lines["metrics on "]
        self._say(f"{proc.name} on {proc.address} (pid {proc.pid}, log {proc.log_path})")

    def _start_coordinator(self, port, deadline):
        self._coordinator = self._spawn("coordinator", "ember-coordinator", [
            f"--data_dir={os.path.join(self.root, 'data', 'coordinator')}",
            f"--port={port}",
            f"--expected_shards={self.shards}",
            f"--checkpoint_dir={self.checkpoint_dir}",
            f"--admin_token_file={self.admin_token_file}",
            "--metrics_port=0",
        ] + self.coordinator_flags)
        self._await_server(self._coordinator, deadline)
        self.coordinator = self._coordinator.address
        self.coordinator_metrics = self._coordinator.metrics

    def _spawn_shard(self, i, port):
        self._shards[i] = self._spawn(f"ps-{i}", "ember-ps", [
            f"--data_dir={os.path.join(self.root, 'data', f'ps-{i}')}",
            f"--port={port}",
            f"--shard_id={i}",
            f"--coordinator={self.coordinator}",
            f"--admin_token_file={self.admin_token_file}",
            "--metrics_port=0",
        ] + self.ps_flags)

    def _await_shard(self, i, deadline):
        proc = self._shards[i]
        self._await_server(proc, deadline)
        self.shard_addresses[i] = proc.address
        self.shard_metrics[i] = proc.metrics

    # --- readiness ----------------------------------------------------------------

    def wait_ready(self, timeout=None):
        """Waits until the coordinator's slot map has an epoch and every shard that
        should run (started, not killed or stopped since) is ALIVE there and routes
        by that epoch. RuntimeError after `timeout` seconds (default start_timeout),
        naming what was last missing, with the log tail of the process concerned;
        at once if such a process has exited or the coordinator was killed.
        """
        self._wait_ready(time.monotonic() + (self.start_timeout if timeout is None
                                             else timeout))

    def _wait_ready(self, deadline):
        if self._coordinator is None or not self._coordinator.wanted:
            raise RuntimeError("the coordinator does not run: start() or "
                               "restart_coordinator() first")
        while True:
            for proc in [self._coordinator] + list(self._shards.values()):
                if proc.wanted and not proc.running:
                    raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}; "
                                       f"{proc.tail()}")
            missing, proc = self._not_ready()
            if missing is None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster is not ready in time: {missing}; "
                                   f"{proc.tail()}")
            time.sleep(_POLL_S)

    def _not_ready(self):
        """(None, None) when ready (see wait_ready), else (what is missing, the
        process it concerns)."""
        coordinator = self._coordinator
        try:
            samples = _scrape(coordinator.metrics)
        except _SCRAPE_ERRORS as e:
            return f"coordinator metrics at {coordinator.metrics}: {e}", coordinator
        epoch = samples.get("ember_coordinator_slot_map_epoch", 0)
        if epoch <= 0:
            registered = int(samples.get("ember_coordinator_shards", 0))
            return (f"no slots assigned yet ({registered} of {self.shards} shards "
                    f"registered)"), coordinator
        for i, proc in sorted(self._shards.items()):
            if not proc.wanted:
                continue
            if samples.get(f'ember_coordinator_shard_alive{{shard="{i}"}}') != 1:
                return f"shard {i} is not ALIVE at the coordinator", proc
            try:
                shard_epoch = _scrape(proc.metrics).get("ember_slot_map_epoch", 0)
            except _SCRAPE_ERRORS as e:
                return f"shard {i} metrics at {proc.metrics}: {e}", proc
            if shard_epoch != epoch:
                return (f"shard {i} routes by epoch {shard_epoch:.0f}, the coordinator's "
                        f"is {epoch:.0f}"), proc
        return None, None

    # --- faults and restarts ------------------------------------------------------

    def kill_shard(self, i, sig=signal.SIGKILL, wait=True):
        """Sends `sig` to shard i's process (by PID). With `wait`, waits until it has
        exited and returns its return code (-N: signal N); pass wait=False for a
        signal that does not end it (SIGSTOP). The shard then counts as down (wait_ready
        skips it) until restart_shard. RuntimeError if it does not run; TimeoutError
        if it still runs stop_grace seconds after a signal other than SIGKILL.
        """
        return self._kill(self._shards.get(i), f"shard {i}", sig, wait)

    def kill_coordinator(self, sig=signal.SIGKILL, wait=True):
        """As kill_shard, for the coordinator."""
        return self._kill(self._coordinator, "the coordinator", sig, wait)

    def kill_serving(self, i, sig=signal.SIGKILL, wait=True):
        """As kill_shard, for follower i."""
        return self._kill(self._serving.get(i), f"follower {i}", sig, wait)

    def _kill(self, proc, what, sig, wait):
        if proc is None or not proc.running:
            raise RuntimeError(f"{what} does not run")
        proc.wanted = False  # down, as far as wait_ready is concerned, until restarted
        proc.signal(sig)
        if not wait:
            return None
        rc = proc.wait(_KILL_WAIT_S if sig == signal.SIGKILL else self.stop_grace)
        if rc is None:
            raise TimeoutError(f"{what} (pid {proc.pid}) still runs after signal {sig}")
        self._say(f"{proc.name} (pid {proc.pid}) ended: {rc}")
        return rc

    def restart_shard(self, i, timeout=None):
        """Starts shard i again (stopping it first if it runs) with its id, data
        directory and port, and waits until the cluster is ready again (the shard has
        its slots back). Returns its address. KeyError if shard i never started;
        RuntimeError as start().
        """
        if i not in self._shards:
            raise KeyError(f"shard {i} was never started")
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        self._stop_procs([self._shards[i]])
        address = self.shard_addresses.get(i)
        self._spawn_shard(i, port=_port_of(address) if address else 0)
        self._await_shard(i, deadline)
        self._wait_ready(deadline)
        return self.shard_addresses[i]

    def restart_coordinator(self, timeout=None):
        """Starts the coordinator again (stopping it first if it runs) on its data
        directory and port, and waits until the cluster is ready again. Returns its
        address. RuntimeError as start().
        """
        if self._coordinator is None:
            raise RuntimeError("the coordinator was never started")
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        self._stop_procs([self._coordinator])
        self._start_coordinator(port=_port_of(self.coordinator), deadline=deadline)
        self._wait_ready(deadline)
        return self.coordinator

    # --- followers ----------------------------------------------------------------

    def start_serving(self, i=None, flags=(), timeout=None, wait_following=False):
        """Starts follower i (ember-serving; default: the lowest index not running) of
        this cluster and waits for its listening line: it has bootstrapped from the
        newest checkpoint, or started empty without one. With `wait_following`, also
        until it follows every shard (its ember_serving_ready metric is 1; without a
        checkpoint, a follower of a restarted shard waits for the first one). `flags`
        come after the common ones (e.g. "--max_staleness_steps=50", "--job=NAME").
        Returns its address; a restart of index i runs on its data directory and port.
        FileNotFoundError without ember-serving in bin_dir; RuntimeError as start(),
        with the follower's log tail.
        """
        binary = os.path.join(self.bin_dir, "ember-serving")
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"{binary} not found: build first (cmake --build build)")
        if self._coordinator is None or not self._coordinator.running:
            raise RuntimeError("start the cluster before a follower")
        if i is None:
            i = next(n for n in range(len(self._serving) + 1)
                     if n not in self._serving or not self._serving[n].running)
        elif i in self._serving and self._serving[i].running:
            raise RuntimeError(f"follower {i} already runs at {self.serving_addresses[i]}")
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        port = _port_of(self.serving_addresses[i]) if i in self.serving_addresses else 0
        name = f"serving-{i}"
        proc = self._spawn(name, "ember-serving", [
            f"--coordinator={self.coordinator}",
            f"--checkpoint_dir={self.checkpoint_dir}",
            f"--data_dir={os.path.join(self.root, 'data', name)}",
            f"--port={port}",
            f"--admin_token_file={self.admin_token_file}",
            "--metrics_port=0",
        ] + _flag_list(flags, "flags"))
        self._serving[i] = proc
        _LIVE.add(self)
        try:
            self._await_server(proc, deadline)
            while wait_following and not self._follows(proc, deadline):
                time.sleep(_POLL_S)
        except BaseException:
            self._stop_procs([proc])
            raise
        self.serving_addresses[i] = proc.address
        return proc.address

    @staticmethod
    def _follows(proc, deadline):
        """True once follower `proc` follows every shard; RuntimeError if it exits
        or `deadline` passes first."""
        try:
            if _scrape(proc.metrics).get("ember_serving_ready") == 1:
                return True
        except _SCRAPE_ERRORS:
            pass
        if not proc.running:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}; "
                               f"{proc.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.name} at {proc.address} does not follow every shard "
                               f"in time; {proc.tail()}")
        return False

    # --- stopping -----------------------------------------------------------------

    def stop(self):
        """Stops every process this cluster started: followers, then shards, then the
        coordinator; each group gets SIGTERM, SIGKILL after stop_grace seconds, and is
        reaped. Removes a temporary root unless kept. Idempotent. Returns
        {name: return code} of the processes it stopped (0: a clean shutdown).
        """
        codes = {}
        codes.update(self._stop_procs(list(self._serving.values())))
        codes.update(self._stop_procs(list(self._shards.values())))
        if self._coordinator is not None:
            codes.update(self._stop_procs([self._coordinator]))
        _LIVE.discard(self)
        if self._owns_root and not self._keep_root and os.path.isdir(self.root):
            shutil.rmtree(self.root, ignore_errors=True)
        return codes

    def _stop_procs(self, procs):
        for p in procs:
            p.wanted = False
        procs = [p for p in procs if p.running]
        for p in procs:
            p.signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace
        codes = {}
        for p in procs:
            rc = p.wait(deadline - time.monotonic())
            if rc is None:
                p.signal(signal.SIGKILL)
                rc = p.wait(_KILL_WAIT_S)
            codes[p.name] = rc
            self._say(f"stopped {p.name} (pid {p.pid}): {rc}")
        return codes

    # --- inspection ---------------------------------------------------------------

    def pids(self):
        """{name: pid} of the processes that run now ("coordinator", "ps-0", ...)."""
        procs = [self._coordinator] + list(self._shards.values()) + list(self._serving.values())
        return {p.name: p.pid for p in procs if p is not None and p.running}

    def log_path(self, name):
        """ROOT/logs/NAME.log: NAME is "coordinator", "ps-I" or "serving-I"."""
        return os.path.join(self.root, "logs", f"{name}.log")

    def log_tail(self, name, lines=40):
        """The last `lines` lines of NAME's log (every start's); "" if it has none."""
        return _tail(self.log_path(name), lines)

    def env(self):
        """The variables emberctl (and scripts) read to reach this cluster."""
        return {"EMBER_COORDINATOR": self.coordinator,
                "EMBER_ADMIN_TOKEN_FILE": self.admin_token_file}

    def emberctl(self, *args, check=True, timeout=60.0):
        """Runs bin_dir/emberctl with this cluster's --coordinator and admin token,
        e.g. emberctl("shards", "list", "--json"). Returns the CompletedProcess (text
        stdout and stderr). With `check`, RuntimeError (with its stderr) unless it
        exits 0.
        """
        argv = [os.path.join(self.bin_dir, "emberctl"), f"--coordinator={self.coordinator}",
                f"--admin_token_file={self.admin_token_file}"] + [str(a) for a in args]
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited with {result.returncode}: "
                               f"{result.stderr.strip()}")
        return result

    def _say(self, line):
        if self._log is not None:
            self._log(line)
