package pwevent.flink.time;

import pwevent.flink.contract.PresentRow;
import pwevent.flink.contract.Reasons;
import pwevent.flink.contract.RejectedEventRow;
import pwevent.flink.contract.TimedRow;
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
 * timed as they came. Side output {@link #REJECTED}: the others, for the Population's dead letters.
 * Stateless.
 */
public final class SlotJudge extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The present events ({@link PresentRow}; slot_end_ms the slot's last millisecond). */
    public static final RowTypeInfo PRESENT = PresentRow.TYPE;
    /** The late and too-far-ahead events, with their dead letter's reason ({@link RejectedEventRow}). */
    public static final OutputTag<Row> REJECTED = new OutputTag<>("late or ahead", RejectedEventRow.TYPE);

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
            return Reasons.TOO_FAR_AHEAD;
        }
        return SlotRules.closed(slot, watermarkMs, originMs, slotMs) || slot <= lateThrough ? Reasons.LATE : null;
    }

    @Override
    public void processElement(StreamRecord<Row> record) {
        Row event = record.getValue();
        long time = (Long) event.getField(TimedRow.TIME_MS);
        long slot = SlotRules.slotOf(originMs, slotMs, time);
        String reason = rejection(slot, (Boolean) event.getField(TimedRow.AHEAD));
        if (reason == null) {
            Row present = new Row(PresentRow.ARITY);
            present.setField(PresentRow.USER, event.getField(TimedRow.USER));
            present.setField(PresentRow.SLOT, slot);
            present.setField(PresentRow.CELL, event.getField(TimedRow.CELL));
            present.setField(PresentRow.PARTITION, event.getField(TimedRow.PARTITION));
            present.setField(PresentRow.OFFSET, event.getField(TimedRow.OFFSET));
            present.setField(PresentRow.ORIGINAL, event.getField(TimedRow.ORIGINAL));
            present.setField(PresentRow.TIME_MS, time);
            present.setField(PresentRow.SLOT_END_MS, SlotRules.slotLastMs(originMs, slotMs, time));
            output.collect(record.replace(present));
        } else {
            Row rejected = new Row(RejectedEventRow.ARITY);
            rejected.setField(RejectedEventRow.SLOT, slot);
            rejected.setField(RejectedEventRow.REASON, reason);
            rejected.setField(RejectedEventRow.USER, event.getField(TimedRow.USER));
            rejected.setField(RejectedEventRow.PARTITION, event.getField(TimedRow.PARTITION));
            rejected.setField(RejectedEventRow.OFFSET, event.getField(TimedRow.OFFSET));
            rejected.setField(RejectedEventRow.ORIGINAL, event.getField(TimedRow.ORIGINAL));
            output.collect(REJECTED, new StreamRecord<>(rejected, record.getTimestamp()));
        }
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        watermarkMs = Math.max(watermarkMs, mark.getTimestamp());
        super.processWatermark(mark);
    }
}
