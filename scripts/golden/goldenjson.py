"""Shared by the golden scripts: the JSON layout of the committed golden files."""
import json

def dump(o):
    """JSON with one key per line (two levels deep) and arrays kept on one line."""
    def block(d, ind):
        pad = " " * ind
        items = [f'{pad}{json.dumps(k)}: {block(v, ind + 1) if isinstance(v, dict) else json.dumps(v)}' for k, v in d.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * (ind - 1) + "}"
    return block(o, 1)
