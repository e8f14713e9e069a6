"""TensorBoard on 127.0.0.1 for the screenshot script and the tests: start, read its HTTP API, stop.

It listens on loopback only, on a port the OS picks (printed by TensorBoard and
read back here), and loads the event files in-process (--load_fast=false), so it
starts the same way everywhere.
"""
import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

URL_LINE = re.compile(r'(http://127\.0\.0\.1:\d+/)')


class TensorBoard:
    def __init__(self, logdir: str, startup_secs: float = 60):
        self.logdir = logdir
        self._log = []
        self._process = subprocess.Popen(
            [sys.executable, '-m', 'tensorboard.main', f'--logdir={logdir}', '--host=127.0.0.1',
             '--port=0', '--load_fast=false', '--reload_interval=1'],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = self._wait_for_url(startup_secs)

    def _wait_for_url(self, timeout: float) -> str:
        deadline = time.time() + timeout
        for line in self._process.stderr:
            self._log.append(line)
            match = URL_LINE.search(line)
            if match:
                return match.group(1)
            if time.time() > deadline:
                break
        self.stop()
        raise RuntimeError('TensorBoard did not start:\n' + ''.join(self._log[-20:]))

    def get(self, path: str, **query) -> bytes:
        url = self.url + path.lstrip('/') + ('?' + urllib.parse.urlencode(query) if query else '')
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read()

    def get_json(self, path: str, **query):
        return json.loads(self.get(path, **query))

    def post_json(self, path: str, body: dict):
        request = urllib.request.Request(self.url + path.lstrip('/'), json.dumps(body).encode(),
                                         {'Content-Type': 'application/json'})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def wait_for(self, check, timeout: float = 60, what: str = 'the expected data'):
        """Polls check() (True when TensorBoard has loaded what is wanted) until it passes."""
        deadline = time.time() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.time() > deadline:
                raise TimeoutError(f'TensorBoard on {self.logdir} has not loaded {what} '
                                   f'in {timeout:.0f}s')
            time.sleep(0.5)

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
