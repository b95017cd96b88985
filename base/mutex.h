// Mutex, SharedMutex, SeqSharedMutex, RwLock and their scoped locks,
// annotated for clang's thread-safety analysis (base/thread_annotations.h),
// so a field declared `GUARDED_BY(mu_)` is only touched with mu_ held and
// `make lint` says where it is not. Every lock of the project's host code is one of these.
//
// Thread safety: they are locks. None is recursive. CondVar waits on a Mutex.
// Ownership: a scoped lock borrows its mutex, which must outlive it.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "base/assert.h"
#include "base/thread_annotations.h"

namespace strata::base {

// A std::mutex the analysis can see. The lowercase names let std::scoped_lock
// and std::unique_lock use it where a scoped lock below does not fit.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis the caller holds this mutex (a path it cannot follow).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// A std::shared_mutex the analysis can see: shared for readers, exclusive
// for writers. Readers may starve a writer (glibc); see RwLock.
class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  bool try_lock_shared() TRY_ACQUIRE_SHARED(true) { return mu_.try_lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

// A SharedMutex that counts its exclusive holds, for readers that read
// without it: Seq() is odd while a writer holds it and moves on with every
// exclusive hold. Such a reader reads Seq(), reads what the lock guards (a
// value may be torn or stale), issues an acquire fence and reads
// SeqRelaxed(): the same even value means no writer came between and what it
// read is whole. Writes after an exclusive hold ends are seen after it too:
// the odd count is ordered before everything the holder writes next
// (a release fence), the even one after (a release store).
class CAPABILITY("shared_mutex") SeqSharedMutex {
 public:
  SeqSharedMutex() = default;
  SeqSharedMutex(const SeqSharedMutex&) = delete;
  SeqSharedMutex& operator=(const SeqSharedMutex&) = delete;

  void lock() ACQUIRE() {
    mu_.lock();
    Begin();
  }
  bool try_lock() TRY_ACQUIRE(true) {
    if (!mu_.try_lock()) return false;
    Begin();
    return true;
  }
  void unlock() RELEASE() {
    seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    mu_.unlock();
  }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  bool try_lock_shared() TRY_ACQUIRE_SHARED(true) { return mu_.try_lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

  uint32_t Seq() const { return seq_.load(std::memory_order_acquire); }
  uint32_t SeqRelaxed() const { return seq_.load(std::memory_order_relaxed); }

  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  void Begin() {
    seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  std::shared_mutex mu_;
  std::atomic<uint32_t> seq_{0};
};

// A reader-writer lock that prefers writers. The default std::shared_mutex
// (glibc) lets a stream of overlapping readers starve a writer forever; the
// native store's readers hold the lock across device reads, so without writer
// preference a busy table would never accept a put. Satisfies the standard
// SharedMutex requirements, so std::unique_lock / std::shared_lock work too.
class CAPABILITY("rw_lock") RwLock {
 public:
  RwLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    STRATA_ASSERT(pthread_rwlock_init(&lock_, &attr) == 0, "pthread_rwlock_init");
    pthread_rwlockattr_destroy(&attr);
  }
  ~RwLock() { pthread_rwlock_destroy(&lock_); }
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  void lock() ACQUIRE() { STRATA_ASSERT(pthread_rwlock_wrlock(&lock_) == 0, "wrlock"); }
  bool try_lock() TRY_ACQUIRE(true) { return pthread_rwlock_trywrlock(&lock_) == 0; }
  void unlock() RELEASE() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() ACQUIRE_SHARED() {
    STRATA_ASSERT(pthread_rwlock_rdlock(&lock_) == 0, "rdlock");
  }
  bool try_lock_shared() TRY_ACQUIRE_SHARED(true) { return pthread_rwlock_tryrdlock(&lock_) == 0; }
  void unlock_shared() RELEASE_SHARED() { pthread_rwlock_unlock(&lock_); }

  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  pthread_rwlock_t lock_;
};

// Holds a Mutex for its scope. Unlock/Lock let a scope drop the mutex around
// slow work (I/O) and take it back; the destructor releases it only if held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// Holds a SharedMutex or RwLock shared (ReaderLock) or exclusively
// (WriterLock) for its scope: `base::ReaderLock lock(&mu_);`.
template <class M>
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(M* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->lock_shared(); }
  ~ReaderLock() RELEASE() { mu_->unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  M* const mu_;
};

template <class M>
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(M* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~WriterLock() RELEASE() { mu_->unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  M* const mu_;
};

// A condition variable over a Mutex. Waits may wake spuriously: call them in
// a loop over the condition, which the analysis then checks under the mutex:
//   while (!ready_) cv_.Wait(&mu_);
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Atomically releases `mu`, waits for a notify, takes `mu` back.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, up to `timeout`. Returns false when the time ran out.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  // As Wait, until `deadline`. Returns false when the deadline passed.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace strata::base
