"""OpenTelemetry for mnemon: spans and metrics of turns, Source calls, routes and writes.

```python
from mnemon import MemoryHost
from mnemon_otel import OpenTelemetryObserver

host = MemoryHost(observers=[OpenTelemetryObserver()])
```
"""

from ._observer import INSTRUMENTATION_NAME as INSTRUMENTATION_NAME
from ._observer import OpenTelemetryObserver as OpenTelemetryObserver

__all__ = ["INSTRUMENTATION_NAME", "OpenTelemetryObserver"]
