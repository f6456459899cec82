// dlock/dlock.hpp — everything: the Client, the lock kinds, leases and fencing.
#pragma once

#include "dlock/client.hpp"
#include "dlock/clock.hpp"
#include "dlock/duration.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/fencing.hpp"
#include "dlock/lease.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/mutex.hpp"
#include "dlock/options.hpp"
#include "dlock/reentrant_mutex.hpp"
#include "dlock/reply.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"
#include "dlock/result.hpp"
#include "dlock/url.hpp"
