package dev.claimd;

import com.google.protobuf.ByteString;
import dev.claimd.v1.ClaimServiceGrpc;
import dev.claimd.v1.HeartbeatRequest;
import dev.claimd.v1.HeartbeatResponse;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The heartbeats of one lease. The shared scheduler only triggers them: each Heartbeat is an
 * asynchronous call whose deadline is the interval or the call timeout, whichever is smaller,
 * and a beat is skipped while the previous one is in flight, so a slow claimd never makes one
 * lease's beats wait for another's. Every method runs under the lease's {@code lock}.
 */
final class Heartbeats {
  private final Claims claims;
  private final Duration interval;
  private final HeartbeatRequest request;
  private final Object lock;
  private final BooleanSupplier wanted;
  private final Consumer<Status.Code> answered;
  private ScheduledExecutorService scheduler;
  private ScheduledFuture<?> beats;
  private boolean inFlight;

  /**
   * @param wanted whether a beat may start now (read under {@code lock})
   * @param answered told the code of every beat's answer (called without {@code lock})
   */
  Heartbeats(Claims claims, Duration interval, HeartbeatRequest request, Object lock,
      BooleanSupplier wanted, Consumer<Status.Code> answered) {
    this.claims = claims;
    this.interval = interval;
    this.request = request;
    this.lock = lock;
    this.wanted = wanted;
    this.answered = answered;
  }

  /** A Heartbeat request (with a checkpoint unless null; renewing for leaseTtl unless null). */
  static HeartbeatRequest request(String namespace, String key, String token,
      Duration leaseTtl, ByteString checkpoint) {
    HeartbeatRequest.Builder request = HeartbeatRequest.newBuilder()
        .setNamespace(namespace).setKey(key).setClaimToken(token);
    if (leaseTtl != null) {
      request.setLeaseTtl(Claims.proto(leaseTtl));
    }
    if (checkpoint != null) {
      request.setCheckpoint(checkpoint);
    }
    return request.build();
  }

  /** The deadline of one beat: the interval or the call timeout, whichever is smaller. */
  Duration deadline() {
    return interval.compareTo(claims.callTimeout()) < 0 ? interval : claims.callTimeout();
  }

  void start(ScheduledExecutorService scheduler) {
    synchronized (lock) {
      this.scheduler = scheduler;
      resume();
    }
  }

  /** Schedules the beats again (after a pause); a closed client's scheduler refuses quietly. */
  void resume() {
    synchronized (lock) {
      if (scheduler == null || beats != null) {
        return;
      }
      long every = Math.max(1, interval.toMillis());
      try {
        beats = scheduler.scheduleWithFixedDelay(this::beat, every, every, TimeUnit.MILLISECONDS);
      } catch (RejectedExecutionException e) {
        // The client is closed: no more heartbeats.
      }
    }
  }

  /** Stops scheduling beats; one in flight still reports its answer. */
  void stop() {
    synchronized (lock) {
      if (beats != null) {
        beats.cancel(false);
        beats = null;
      }
    }
  }

  private void beat() {
    synchronized (lock) {
      if (inFlight || beats == null || !wanted.getAsBoolean()) {
        return;
      }
      inFlight = true;
    }
    try {
      claims.callAsync(ClaimServiceGrpc.getHeartbeatMethod(), request, deadline(),
          new StreamObserver<HeartbeatResponse>() {
            @Override
            public void onNext(HeartbeatResponse value) {}

            @Override
            public void onError(Throwable t) {
              done(Status.fromThrowable(t).getCode());
            }

            @Override
            public void onCompleted() {
              done(Status.Code.OK);
            }
          });
    } catch (RuntimeException e) {
      done(Status.Code.UNKNOWN);
    }
  }

  private void done(Status.Code code) {
    synchronized (lock) {
      inFlight = false;
    }
    answered.accept(code);
  }
}
