import sys
from pathlib import Path

# the suite's reference Source lives beside these tests
sys.path.insert(0, str(Path(__file__).parent))
