package pwevent.flink.time;

import java.io.Serializable;
import java.util.Map;

/**
 * Where the partitions of a topic end now: what a {@link ValidTime} subtask calls the backlog when it
 * (re)starts (docs/streaming.md, "Time"). {@link KafkaPartitionEnds} asks the broker.
 */
public interface PartitionEnds extends Serializable {
    /** Per partition of the topic that subtask `subtask` of `subtasks` owns ({@link PartitionTimes#owns}):
     *  one past its last committed record now, 0 for a partition without one or, for a subtask
     *  without restored state (`restored` false), one its source starts reading after that record. */
    Map<Integer, Long> owned(int subtask, int subtasks, boolean restored) throws Exception;
}
