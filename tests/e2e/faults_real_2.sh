#!/bin/bash
# e2e: faults.sh real oos apiserver cmkill pause (docs/faults.md)
exec bash "$(dirname "$0")/faults.sh" real oos apiserver cmkill pause
