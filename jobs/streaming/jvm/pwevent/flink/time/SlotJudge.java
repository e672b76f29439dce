package pwevent.flink.time;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.OutputTag;

/**
 * Each valid event judged against its slot (docs/streaming.md, "Time"), chained behind the events'
 * {@link ValidTime}: an event is {@code late} when the watermark this operator has received (the one
 * ValidTime emitted before the event) has closed the event's slot ({@link SlotRules#closed}, the rule
 * Membership applies to a requirement record), or when its slot is one a resumed job's releases
 * decided (at most {@code lateThrough}); it is {@code too_far_ahead} when ValidTime flagged it
 * {@code ahead} (that reason first). No watermark yet: nothing is late by the watermark.
 *
 * <p>Input: {@link ValidTime#OUT}. Output: the events that count for their slot, {@link #PRESENT},
 * timed as they came. Side output {@link #REJECTED}: the others, Row(slot, reason, user, partition,
 * offset, original), for the Population's dead letters. Stateless.
 */
public final class SlotJudge extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The present events: Row(user, slot, cell, partition, offset, original, time_ms, slot_end_ms),
     *  slot_end_ms the slot's last millisecond. */
    public static final RowTypeInfo PRESENT = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.LONG, Types.INT, Types.INT, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE), Types.LONG, Types.LONG},
            new String[] {"user", "slot", "cell", "partition", "offset", "original", "time_ms", "slot_end_ms"});
    /** The late and too-far-ahead events, with their dead letter's reason. */
    public static final OutputTag<Row> REJECTED = new OutputTag<>("late or ahead", new RowTypeInfo(
            new TypeInformation<?>[] {Types.LONG, Types.STRING, Types.STRING, Types.INT, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE)},
            new String[] {"slot", "reason", "user", "partition", "offset", "original"}));
    static final String LATE = "late";
    static final String TOO_FAR_AHEAD = "too_far_ahead";

    private final long originMs;
    private final long slotMs;
    private final long lateThrough;
    private transient long watermarkMs;

    public SlotJudge(long originMs, long slotMs, long lateThrough) {
        this.originMs = originMs;
        this.slotMs = slotMs;
        this.lateThrough = lateThrough;
    }

    /** `timed` (ValidTime's output), judged; chained to it (at its parallelism). */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> timed, long originMs, long slotMs,
                                                        long lateThrough) {
        return timed.transform("judge each event's slot", PRESENT, new SlotJudge(originMs, slotMs, lateThrough))
                .setParallelism(timed.getParallelism());
    }

    @Override
    public void open() throws Exception {
        super.open();
        watermarkMs = Long.MIN_VALUE;
    }

    /** The reason an event of `slot` does not count (null: it counts). */
    String rejection(long slot, boolean ahead) {
        if (ahead) {
            return TOO_FAR_AHEAD;
        }
        return SlotRules.closed(slot, watermarkMs, originMs, slotMs) || slot <= lateThrough ? LATE : null;
    }

    @Override
    public void processElement(StreamRecord<Row> record) {
        Row event = record.getValue();
        long time = (Long) event.getField(1);
        long slot = SlotRules.slotOf(originMs, slotMs, time);
        String reason = rejection(slot, (Boolean) event.getField(6));
        if (reason == null) {
            output.collect(record.replace(Row.of(event.getField(0), slot, event.getField(2), event.getField(3),
                    event.getField(4), event.getField(5), time, SlotRules.slotLastMs(originMs, slotMs, time))));
        } else {
            output.collect(REJECTED, new StreamRecord<>(Row.of(slot, reason, event.getField(0), event.getField(3),
                    event.getField(4), event.getField(5)), record.getTimestamp()));
        }
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        watermarkMs = Math.max(watermarkMs, mark.getTimestamp());
        super.processWatermark(mark);
    }
}
