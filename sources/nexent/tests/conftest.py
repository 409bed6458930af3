import sys
from pathlib import Path

# the loopback fake and its helpers live beside the tests
sys.path.insert(0, str(Path(__file__).parent))
