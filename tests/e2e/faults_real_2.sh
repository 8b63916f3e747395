#!/bin/bash
# e2e: faults.sh real oos zone apiserver cmkill (docs/faults.md)
exec bash "$(dirname "$0")/faults.sh" real oos zone apiserver cmkill
