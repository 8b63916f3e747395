#!/bin/bash
# e2e: faults.sh kcsi oos apiserver cmkill pause (docs/faults.md)
exec bash "$(dirname "$0")/faults.sh" kcsi oos apiserver cmkill pause
