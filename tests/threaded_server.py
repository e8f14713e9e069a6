"""A socketserver answering on a daemon thread for as long as a with-block lasts (the tests'
servers and proxies on 127.0.0.1)."""
import contextlib
import threading


@contextlib.contextmanager
def serving(server):
    """server answers inside the block; shut down and closed after it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class ServedInThread:
    """For a class holding its socketserver in self._server: a context manager serving it."""

    def __enter__(self):
        self._serving = serving(self._server)
        self._serving.__enter__()
        return self

    def __exit__(self, *exc_info):
        return self._serving.__exit__(*exc_info)
