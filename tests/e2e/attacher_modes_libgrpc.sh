#!/bin/bash
# e2e: attacher_modes.sh with csi-testdriver-libgrpc as the driver: the same handlers served by Debian's
# libgrpc (tests/grpc-peer), so kcsi's client side is checked against a gRPC server it did not write.
KCSI_TESTDRIVER=csi-testdriver-libgrpc exec bash "$(dirname "$0")/attacher_modes.sh"
