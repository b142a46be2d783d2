"""A stand-in of tqdm.tqdm (tests only: Debian's python here has no tqdm,
and vLLM always has it): records each bar's total, updates and close in
BARS, so a test can see the progress a loader drew."""
BARS = []


class tqdm:
    def __init__(self, iterable=None, total=None, **kw):
        self.total, self.n, self.closed, self.kw = total, 0, False, kw
        BARS.append(self)

    def update(self, n=1):
        self.n += n

    def close(self):
        self.closed = True
