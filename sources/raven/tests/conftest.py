import sys
from pathlib import Path

# the reference backends live beside the tests and are named by `module:callable`
sys.path.insert(0, str(Path(__file__).parent))
