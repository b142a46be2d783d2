/**
 * @file pinio.h
 * @brief Umbrella header: includes every public pinio header.
 */
#ifndef PINIO_PINIO_H
#define PINIO_PINIO_H

#include "pinio/bench.h"
#include "pinio/bytes.h"
#include "pinio/common.h"
#include "pinio/load.h"
#include "pinio/controller.h"
#include "pinio/fileio.h"
#include "pinio/gen.h"
#include "pinio/numa.h"
#include "pinio/pool.h"
#include "pinio/ring.h"
#include "pinio/safetensors.h"
#include "pinio/save.h"
#include "pinio/sink.h"
#include "pinio/stream.h"
#include "pinio/sys.h"
#include "pinio/version.h"
#include "pinio/view.h"

#endif /* PINIO_PINIO_H */
