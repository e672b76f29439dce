package pwevent.flink.membership;

import pwevent.flink.contract.ChangeRow;
import pwevent.flink.contract.PresenceRow;
import pwevent.flink.contract.Reasons;
import pwevent.flink.contract.RefusedRequirementRow;
import pwevent.flink.contract.TimedRow;
import pwevent.flink.parsing.RequirementPayload;
import pwevent.flink.time.SlotRules;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Each user's ledger class from its requirement records (docs/streaming.md, "Topology"), keyed by
 * user: the host of {@link UserMembership} under {@link MembershipRule}.
 *
 * <p>Input 1: the requirements' {@link ValidTime#OUT} rows (user, time_ms, cell, partition, offset,
 * {@link RequirementPayload} bytes, ahead): a record is refused at once as {@code too_far_ahead} when
 * ValidTime's lead guard did not believe its time, and as {@code invalid_requirement} when no ledger
 * can run it (whatever its time: the rule refuses it whatever the user declared before); any other is
 * buffered until its slot closes, or refused as {@code late} if it already has. Input 2:
 * {@link FirstPresence#PRESENCE} rows (user, slot): it carries the
 * events' watermark, so that a requirement record is judged late against the events' progress and
 * its slot closes here no later than the events' slot does; with a default requirement also each
 * (user, slot) present without a class that Membership may still need. One event-time timer per
 * user and slot with something to apply, at the slot's last millisecond.
 *
 * <p>Output ({@link #OUT}, {@link ChangeRow}, timed at the slot's last millisecond): a change of the
 * user's class (vms: the slot's first millisecond). Side output {@link #REJECTED}
 * ({@link RefusedRequirementRow}): each record that did not apply, for its dead letter.
 */
public final class Membership extends KeyedCoProcessFunction<String, Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    public static final RowTypeInfo OUT = ChangeRow.TYPE;
    public static final OutputTag<Row> REJECTED = new OutputTag<>("requirement records that did not apply",
            RefusedRequirementRow.TYPE);

    private final MembershipRule rule;
    private final long originMs;
    private final long slotMs;
    private transient ValueState<byte[]> users;

    public Membership(MembershipRule rule, long originMs, long slotMs) {
        this.rule = rule;
        this.originMs = originMs;
        this.slotMs = slotMs;
    }

    /** Membership over `requirements` (the requirements' timed rows) and `presences`, both keyed by user. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> requirements, DataStream<Row> presences,
                                                        Membership membership) {
        return requirements.keyBy(new ByUser(), Types.STRING).connect(presences.keyBy(new ByUser(), Types.STRING))
                .process(membership, OUT);
    }

    @Override
    public void open(OpenContext context) {
        users = getRuntimeContext().getState(new ValueStateDescriptor<>("membership",
                PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
    }

    @Override
    public void processElement1(Row row, Context context, Collector<Row> out) throws Exception {
        long time = (Long) row.getField(TimedRow.TIME_MS);
        int partition = (Integer) row.getField(TimedRow.PARTITION);
        long offset = (Long) row.getField(TimedRow.OFFSET);
        RequirementPayload payload = RequirementPayload.decode((byte[]) row.getField(TimedRow.ORIGINAL));
        if (Boolean.TRUE.equals(row.getField(TimedRow.AHEAD))) {
            context.output(REJECTED, refused(Reasons.TOO_FAR_AHEAD, Reasons.TOO_FAR_AHEAD_DETAIL, partition, offset,
                    payload.original()));
            return;
        }
        if (!payload.registers()) {  // no ledger can run it: refused whatever came before, so at once
            context.output(REJECTED, refused(Reasons.INVALID_REQUIREMENT, payload.detail(), partition, offset,
                    payload.original()));
            return;
        }
        long slot = SlotRules.inForceFrom(originMs, slotMs, time);
        UserMembership user = UserMembership.decode(users.value());
        UserMembership.Rejection late = user.receive(new UserMembership.Pending(slot, time, partition, offset, payload),
                context.timerService().currentWatermark(), originMs, slotMs);
        if (late != null) {
            context.output(REJECTED, rejected(late));
            return;
        }
        context.timerService().registerEventTimeTimer(lastMs(slot));
        users.update(user.encode());
    }

    @Override
    public void processElement2(Row row, Context context, Collector<Row> out) throws Exception {
        long slot = (Long) row.getField(PresenceRow.V);
        UserMembership user = UserMembership.decode(users.value());
        if (user.seen(slot)) {
            context.timerService().registerEventTimeTimer(lastMs(slot));
            users.update(user.encode());
        }
    }

    @Override
    public void onTimer(long timestamp, OnTimerContext context, Collector<Row> out) throws Exception {
        String name = context.getCurrentKey();
        UserMembership user = UserMembership.decode(users.value());
        for (Object done : user.close(SlotRules.slotOf(originMs, slotMs, timestamp), name, rule, originMs)) {
            if (done instanceof MembershipRule.Change change) {
                Row changed = new Row(ChangeRow.ARITY);
                changed.setField(ChangeRow.USER, name);
                changed.setField(ChangeRow.CLS, change.target());
                changed.setField(ChangeRow.VMS, SlotRules.firstMs(originMs, slotMs, change.slot()));
                changed.setField(ChangeRow.SLOT, change.slot());
                changed.setField(ChangeRow.PREVIOUS, change.previous());
                changed.setField(ChangeRow.REQUIREMENT, change.requirement());
                out.collect(changed);
            } else {
                context.output(REJECTED, rejected((UserMembership.Rejection) done));
            }
        }
        if (user.empty()) {
            users.clear();
        } else {
            users.update(user.encode());
        }
    }

    private long lastMs(long slot) {
        return SlotRules.lastMs(originMs, slotMs, slot);
    }

    private static Row rejected(UserMembership.Rejection rejection) {
        return refused(rejection.reason(), rejection.detail(), rejection.partition(), rejection.offset(),
                rejection.original());
    }

    private static Row refused(String reason, String detail, int partition, long offset, byte[] original) {
        Row row = new Row(RefusedRequirementRow.ARITY);
        row.setField(RefusedRequirementRow.REASON, reason);
        row.setField(RefusedRequirementRow.DETAIL, detail);
        row.setField(RefusedRequirementRow.PARTITION, partition);
        row.setField(RefusedRequirementRow.OFFSET, offset);
        row.setField(RefusedRequirementRow.ORIGINAL, original);
        return row;
    }
}
