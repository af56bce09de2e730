import sys
from pathlib import Path

# Let test modules import the shared helpers module.
sys.path.insert(0, str(Path(__file__).resolve().parent))
