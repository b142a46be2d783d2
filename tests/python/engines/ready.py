"""The engine plugins' end-of-load log line (pinio.integrations._log),
checked the same way for every engine: types, the bytes, the time to
ready's order (>= the reads' time >= 0) and the words saying how the bytes
came; never a time's value."""
HOW = {"read", "shared", "mapped"}


def of_record(record):
    """A logging.LogRecord as the drivers report it: {level, message, pinio_*}."""
    return dict({k: v for k, v in vars(record).items() if k.startswith("pinio_")},
                level=record.levelname, message=record.getMessage())


def check(lines):
    """Each line's checks; returns [(pinio_bytes, set of how words)] in order."""
    out = []
    for x in lines:
        msg = x["message"]
        assert x["level"] == "INFO", msg
        assert isinstance(x["pinio_bytes"], int) and not isinstance(x["pinio_bytes"], bool), msg
        for k in ("pinio_ready_s", "pinio_io_s", "pinio_gb_per_s"):
            assert isinstance(x[k], float), (k, msg)
        assert x["pinio_ready_s"] >= x["pinio_io_s"] >= 0 and x["pinio_gb_per_s"] >= 0, msg
        how = set(x["pinio_how"].split("+"))
        assert how <= HOW, msg
        assert f"{x['pinio_bytes']} bytes ready in " in msg, msg
        out.append((x["pinio_bytes"], how))
    return out
