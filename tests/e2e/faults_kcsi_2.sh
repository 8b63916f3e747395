#!/bin/bash
# e2e: faults.sh kcsi oos zone apiserver cmkill (docs/faults.md)
exec bash "$(dirname "$0")/faults.sh" kcsi oos zone apiserver cmkill
