#!/bin/bash
# e2e: faults.sh real stop heal cut (docs/faults.md)
exec bash "$(dirname "$0")/faults.sh" real stop heal cut
