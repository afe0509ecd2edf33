"""The synchronous client: `client.py` is generated from `askgate._async.client`
(`scripts/generate.sh`, with unasync; do not edit it), `runtime.py` is its own."""
