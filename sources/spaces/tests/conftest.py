import sys
from pathlib import Path

# the shared helpers (spaces_kit) and the writer script live beside the tests
sys.path.insert(0, str(Path(__file__).parent))
