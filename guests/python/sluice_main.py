"""componentize-py entry point: imports the actor module `app` and exports `Actor` and `Batch`.

Build: componentize-py -d wit -w batched-actor-world componentize sluice_main -p ACTOR_DIR -p guests/python -o actor.wasm
"""

import app  # noqa: F401  the user's actor module; importing it registers the actor

from sluice._actor import Export as Actor  # noqa: F401  the WIT `actor` export
from sluice._batch import Batch  # noqa: F401  the WIT `batch` export (batched turns)
