#!/bin/bash
# e2e: faults.sh kcsi stop heal cut (docs/faults.md)
exec bash "$(dirname "$0")/faults.sh" kcsi stop heal cut
