"""The asyncio client, the source the synchronous one (`askgate._sync`) is generated
from (`scripts/generate.sh`, with unasync)."""
