#!/bin/bash
# e2e: faults.sh kcsi zone rwop (docs/faults.md; 3 hosts)
exec bash "$(dirname "$0")/faults.sh" kcsi zone rwop
