"""The committer: delivers handed-off schedules at their due time, exactly once.

A Spark micro-batch costs hundreds of milliseconds here, so a batch that starts when a
schedule falls due delivers it that late. With a lead, the hold raises a schedule early
and the fire stage hands it over through the in-flight topic
(:mod:`delayline.fire.inflight`); committers read that topic and deliver each schedule
in a transaction committed at its due time. A committer is a thread: ``delayline run``
keeps one in the pipeline's process, ``delayline committer`` runs one on its own.

* The committers of a pipeline form a consumer group and split the in-flight topic's
  partitions (:mod:`delayline.committer.inflight_reader`). Each partition is delivered
  by producers of its own
  (:func:`delayline.core.identifiers.committer_transactional_id`): a committer that
  takes a partition over, after a rebalance or a kill, fences the producers of the one
  before, which aborts their open transactions, then reads the partition to its end
  before it delivers anything of it.

* Schedules due within
  :attr:`~delayline.committer.config.CommitterConfig.group_width_ms` of each other share
  a transaction (within
  :attr:`~delayline.committer.config.CommitterConfig.busy_group_width_ms` while a
  partition is busy: each transaction costs the broker about 2 ms of CPU), written once
  its latest due time has passed by the broker's clock
  (:mod:`delayline.committer.broker_clock`) and committed at once: no reader, whatever
  its isolation level, sees a delivery before its due time, and its record timestamp is
  when it was written, never before the due time. For a target named by
  :attr:`~delayline.committer.config.CommitterConfig.write_ahead_topics` it is written
  as long before its first due time as recent writes took (plus
  :attr:`~delayline.committer.config.CommitterConfig.write_ahead_ms`) and committed at
  its latest due time, never before: a ``read_committed`` reader sees it that much
  sooner, a ``read_uncommitted`` one that much early. An open transaction holds back
  ``read_committed`` readers of the partitions it wrote to, which is why it opens only
  just before its due time, not a lead ahead (a busy partition's group, written before
  its first due time, stays open up to its width longer).
* A burst (more than :attr:`~delayline.committer.config.CommitterConfig.max_group_size`
  schedules due within
  :attr:`~delayline.committer.config.CommitterConfig.burst_width_ms`) to a write-ahead
  target cannot be written at its due time: writing takes about 0.15 ms a delivery here.
  It is written ahead instead, in groups that wide, started as long before the earliest
  is due as writing the next ``lanes`` groups is expected to take, one group after
  another (:attr:`delayline.committer.ownership.Slot.writing`), each committed at its
  latest due time, never before.
* A group with a target topic stamped on append (``LogAppendTime``) is written only once
  due, so the broker's stamp is never before the due time.
* Exactly once: the transaction also writes each in-flight record's tombstone. Once a
  second, after a transaction, the committer commits its consumer offset (never past a
  schedule not yet delivered); it only bounds what a restart reads again. After a crash,
  the partition's next owner (the committer restarted, or another) fences the old
  producers, reads the partition from that offset to its end before delivering anything
  of it, and skips what a tombstone shows delivered. What was pending is delivered at
  once if already due.
* A cancel or an update that the committer reads before it writes a delivery *withholds*
  it (:mod:`delayline.committer.watch`): the committer reads the input topics beside the
  hold, and 20 ms before a group is written waits until it has read every input record
  acknowledged by then. A group written ahead whose member is withheld while it waits
  for its due time is aborted and written again without it. A withheld schedule's group
  writes only its in-flight tombstone.
* A failure (Kafka away, a fatal producer error) starts the committer afresh after
  :data:`delayline.committer.service.RETRY_MS`: nothing is lost, deliveries are only
  late.

The parts, each a module of this package:

* :mod:`~delayline.committer.service`: the committer's thread, started afresh after a
  failure; :mod:`~delayline.committer.session`: one life of it, its loop;
  :mod:`~delayline.committer.config`: its settings and status.
* :mod:`~delayline.committer.ownership`: the in-flight partitions it owns and their
  producers; :mod:`~delayline.committer.inflight_reader`: reading the in-flight topic as
  a member of the committers' group; :mod:`~delayline.committer.read_progress`: how far
  each partition owned is read, and whether it is caught up.
* :mod:`~delayline.committer.due_plan`: the schedules pending, grouped by due time;
  :mod:`~delayline.committer.broker_clock`: due times judged by the broker's clock.
* :mod:`~delayline.committer.lanes` and :mod:`~delayline.committer.writing`: writing and
  committing groups; :mod:`~delayline.committer.turns`: what each schedule writes;
  :mod:`~delayline.committer.tally`: what was delivered, how long writing took;
  :mod:`~delayline.committer.warming`: target topics' facts read ahead of their
  deliveries.
* :mod:`~delayline.committer.withholding`, :mod:`~delayline.committer.watch`,
  :mod:`~delayline.committer.later` (its bulk in
  :mod:`~delayline.committer.later_columns`, their runs on disk in
  :mod:`~delayline.committer.later_runs`), :mod:`~delayline.committer.read_barrier`,
  :mod:`~delayline.committer.rearms`, :mod:`~delayline.committer.checkpoint_log`:
  withholding what a later cancel or update ends; :mod:`~delayline.committer.following`:
  when the watch may forget (once the pipeline has read it).
* :mod:`~delayline.committer.pacing` and :mod:`~delayline.committer.recurring`: target
  rates and windows, recurring schedules.
"""
