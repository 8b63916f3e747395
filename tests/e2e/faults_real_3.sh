#!/bin/bash
# e2e: faults.sh real zone rwop (docs/faults.md; 3 hosts)
exec bash "$(dirname "$0")/faults.sh" real zone rwop
