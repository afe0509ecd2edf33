"""deploy/check.sh's last step: what no schema checks.

- deploy/compose.yaml has one askgate node on the sqlite backend with its data
  directory in a volume; behind the profile `redis`, Redis with AOF and three nodes on
  the redis backend; all built from deploy/Dockerfile; the bot behind its own profile;
- every ASKGATE_* variable named in deploy/ (compose, Dockerfile, manifests, rendered
  chart) or in deploy/README.md is one the askgate binary reads, and the compose file's
  variables and ports are all in that guide;
- every setting of every askgate.toml (the ConfigMap, the chart's rendered ones) is an
  `askgate serve` flag.

Usage: check.py ASKGATE_BINARY RENDERED_CHARTS_DIR
"""

import pathlib
import re
import subprocess
import sys
import tomllib

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUBCOMMANDS = ["serve", "ask", "watch", "pending", "answer", "bot", "attach", "health"]
ENV = re.compile(r"\bASKGATE_[A-Z0-9_]+\b")

failures = []


def fail(message):
    failures.append(message)


def help_text(askgate, subcommand):
    return subprocess.run(
        [askgate, subcommand, "--help"], capture_output=True, text=True, check=True
    ).stdout


def deploying_guide():
    path = ROOT / "deploy/README.md"
    if not path.exists():
        fail("deploy/README.md is missing")
        return ""
    return path.read_text()


def documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def main():
    askgate, rendered = sys.argv[1], pathlib.Path(sys.argv[2])
    helps = {sub: help_text(askgate, sub) for sub in SUBCOMMANDS}
    known_env = set().union(*(ENV.findall(h) for h in helps.values())) | {"ASKGATE_CONFIG"}
    serve_flags = set(re.findall(r"--([a-z0-9-]+)", helps["serve"])) - {"help", "config"}
    deploying = deploying_guide()

    # The compose file.
    compose_path = ROOT / "deploy/compose.yaml"
    compose = yaml.safe_load(compose_path.read_text())
    services = compose.get("services", {})
    for name in ["askgate", "redis", "askgate-1", "askgate-2", "askgate-3", "bot"]:
        if name not in services:
            fail(f"compose.yaml has no service {name}")
    single = services.get("askgate", {})
    single_env = single.get("environment", {})
    data_dir = single_env.get("ASKGATE_DATA_DIR", "")
    if single_env.get("ASKGATE_BACKEND") != "sqlite" or single.get("profiles"):
        fail("compose.yaml: the default node (askgate) is not on the sqlite backend")
    if not any(str(v).endswith(f":{data_dir}") for v in single.get("volumes", [])) or not data_dir:
        fail("compose.yaml: the sqlite node's data directory is not a volume")
    redis = services.get("redis", {})
    if "--appendonly" not in redis.get("command", []):
        fail("compose.yaml: redis runs without AOF (--appendonly yes)")
    for name in ["redis", "askgate-1", "askgate-2", "askgate-3"]:
        if services.get(name, {}).get("profiles") != ["redis"]:
            fail(f"compose.yaml: {name} is not behind the profile `redis`")
    for name in ["askgate-1", "askgate-2", "askgate-3"]:
        node = services.get(name, {})
        env = node.get("environment", {})
        if env.get("ASKGATE_BACKEND") != "redis" or not str(env.get("ASKGATE_REDIS_URL", "")).startswith("redis://redis:"):
            fail(f"compose.yaml: {name} is not on the redis backend at the redis service")
    for name in ["askgate", "askgate-1", "askgate-2", "askgate-3"]:
        node = services.get(name, {})
        if node.get("build", {}).get("dockerfile") != "deploy/Dockerfile":
            fail(f"compose.yaml: {name} is not built from deploy/Dockerfile")
        for port in node.get("ports", []):
            host = str(port).split(":")[0]
            if host not in deploying:
                fail(f'compose.yaml: port {host} of {name} is not in deploy/README.md')
    if services.get("bot", {}).get("profiles") != ["bot"]:
        fail("compose.yaml: the bot is not behind the profile `bot`")
    compose_env = set(ENV.findall(compose_path.read_text()))
    for name in sorted(compose_env - set(ENV.findall(deploying))):
        fail(f'compose.yaml sets {name}, which deploy/README.md does not mention')

    # Variables anywhere.
    sources = {"deploy/README.md": deploying}
    for path in [ROOT / "deploy/Dockerfile", compose_path, *sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))]:
        sources[str(path.relative_to(ROOT))] = path.read_text()
    for path in sorted(rendered.glob("*.yaml")):
        sources[f"the chart rendered with {path.stem} values"] = path.read_text()
    for where, text in sources.items():
        for name in sorted(set(ENV.findall(text)) - known_env):
            fail(f"{where} names {name}, which askgate does not read")

    # askgate.toml settings.
    configs = []
    for path in [ROOT / "deploy/kubernetes/configmap.yaml", *sorted(rendered.glob("*.yaml"))]:
        for doc in documents(path):
            if doc.get("kind") == "ConfigMap" and "askgate.toml" in doc.get("data", {}):
                configs.append((path.name, doc["data"]["askgate.toml"]))
    if len(configs) < 2:
        fail("found no askgate.toml in the ConfigMap and the rendered charts")
    for where, text in configs:
        try:
            settings = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            fail(f"askgate.toml in {where} is not TOML: {e}")
            continue
        for key in settings:
            if key.replace("_", "-") not in serve_flags:
                fail(f"askgate.toml in {where} sets {key!r}, which is no askgate serve flag")

    if failures:
        print("\n".join(f"FAIL {f}" for f in failures), file=sys.stderr)
        sys.exit(1)
    print(
        f"compose: {len(services)} services; {len(sources)} files name only known variables; "
        f"{len(configs)} askgate.toml files hold only serve settings"
    )


if __name__ == "__main__":
    main()
