# Reference chat-template rendering as transformers renders it in Python:
# jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
# loop controls, transformers' tojson (ensure_ascii=False), raise_exception
# and strftime_now. Renders each case of the JSON list in argv[1]
# ({template, bos_token, eos_token, messages, add_generation_prompt}) and
# prints a JSON list of {text} or {error}.
import datetime, json, sys
import jinja2, jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)

out = []
for case in json.load(open(sys.argv[1], encoding="utf-8")):
    try:
        text = env.from_string(case["template"]).render(
            messages=case["messages"], add_generation_prompt=case["add_generation_prompt"],
            bos_token=case["bos_token"], eos_token=case["eos_token"])
        out.append({"text": text})
    except Exception as e:
        out.append({"error": str(e)})
print(json.dumps(out))
