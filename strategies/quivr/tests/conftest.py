import sys
from pathlib import Path

# the fixture loader (quivr_fixtures) and the reference rankers live beside the tests
sys.path.insert(0, str(Path(__file__).parent))
