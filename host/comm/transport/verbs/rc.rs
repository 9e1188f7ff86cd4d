//! Reliable-connected QPs (InfiniBand / RoCE): the address each end exchanges through the
//! bootstrap and the attributes of each state transition (pure, so they are tested here).
use bytemuck::{Pod, Zeroable};
use rdma_sys::*;

/// One end of an RC connection, as exchanged through the bootstrap.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct QpInfo {
    /// The port's LID (InfiniBand addressing; 0 on RoCE, which addresses by `gid`).
    pub lid: u16,
    /// The HCA port number the QP uses.
    pub port: u8,
    /// Index of `gid` in the port's GID table (the source GID on RoCE).
    pub gid_index: u8,
    /// The QP number.
    pub qpn: u32,
    /// Starting packet sequence number of this end's send queue.
    pub psn: u32,
    /// Padding, so the struct is `Pod` and travels as raw bytes; always 0.
    pub _pad: u32,
    /// The port's GID; all zero: address by LID only (no GRH).
    pub gid: [u8; 16],
}
const _: () = assert!(std::mem::size_of::<QpInfo>() == 32);

/// The attribute mask and fields for one RC state transition (pure, so it is testable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpStep {
    /// RESET -> INIT: port, partition key and access rights (local write, remote write).
    Init,
    /// INIT -> RTR (ready to receive): the peer's QP number, PSN and address, path MTU.
    Rtr,
    /// RTR -> RTS (ready to send): our PSN, timeouts and retry counts.
    Rts,
}

/// Attributes of `step` for a QP talking to `remote` from `local`.
pub fn qp_attr(step: QpStep, local: &QpInfo, remote: &QpInfo) -> (ibv_qp_attr, ibv_qp_attr_mask) {
    // SAFETY: ibv_qp_attr is plain data; zero is a valid starting point.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    use ibv_qp_attr_mask as M;
    match step {
        QpStep::Init => {
            a.qp_state = ibv_qp_state::IBV_QPS_INIT;
            a.pkey_index = 0;
            a.port_num = local.port;
            a.qp_access_flags =
                (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE).0;
            (a, M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS)
        }
        QpStep::Rtr => {
            a.qp_state = ibv_qp_state::IBV_QPS_RTR;
            a.path_mtu = ibv_mtu::IBV_MTU_4096;
            a.dest_qp_num = remote.qpn;
            a.rq_psn = remote.psn;
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 12;
            a.ah_attr.dlid = remote.lid;
            a.ah_attr.port_num = local.port;
            if remote.gid != [0; 16] {
                // RoCE (and routed IB): address by GID.
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid.raw = remote.gid;
                a.ah_attr.grh.sgid_index = local.gid_index;
                a.ah_attr.grh.hop_limit = 1;
            }
            let m = M::IBV_QP_STATE
                | M::IBV_QP_AV
                | M::IBV_QP_PATH_MTU
                | M::IBV_QP_DEST_QPN
                | M::IBV_QP_RQ_PSN
                | M::IBV_QP_MAX_DEST_RD_ATOMIC
                | M::IBV_QP_MIN_RNR_TIMER;
            (a, m)
        }
        QpStep::Rts => {
            a.qp_state = ibv_qp_state::IBV_QPS_RTS;
            a.sq_psn = local.psn;
            a.timeout = 14;
            a.retry_cnt = 7;
            a.rnr_retry = 7;
            a.max_rd_atomic = 1;
            (
                a,
                M::IBV_QP_STATE
                    | M::IBV_QP_SQ_PSN
                    | M::IBV_QP_TIMEOUT
                    | M::IBV_QP_RETRY_CNT
                    | M::IBV_QP_RNR_RETRY
                    | M::IBV_QP_MAX_QP_RD_ATOMIC,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_transitions_set_the_required_attributes() {
        let me = QpInfo { lid: 3, port: 1, gid_index: 0, qpn: 77, psn: 100, _pad: 0, gid: [0; 16] };
        let peer = QpInfo { lid: 9, port: 1, gid_index: 0, qpn: 88, psn: 200, _pad: 0, gid: [1; 16] };
        let (a, m) = qp_attr(QpStep::Init, &me, &peer);
        assert_eq!((a.qp_state, a.port_num), (ibv_qp_state::IBV_QPS_INIT, 1));
        assert!(m.0 & ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0 != 0);
        let (a, m) = qp_attr(QpStep::Rtr, &me, &peer);
        assert_eq!((a.dest_qp_num, a.rq_psn, a.ah_attr.dlid, a.ah_attr.is_global), (88, 200, 9, 1));
        assert!(m.0 & ibv_qp_attr_mask::IBV_QP_AV.0 != 0 && m.0 & ibv_qp_attr_mask::IBV_QP_DEST_QPN.0 != 0);
        let (a, _) = qp_attr(QpStep::Rts, &me, &peer);
        assert_eq!((a.qp_state, a.sq_psn), (ibv_qp_state::IBV_QPS_RTS, 100));
    }

    #[test]
    fn qp_info_round_trips_through_bytes() {
        let q = QpInfo { lid: 0x1234, port: 1, gid_index: 3, qpn: 0xabcdef, psn: 7, _pad: 0, gid: [9; 16] };
        let back: QpInfo = bytemuck::pod_read_unaligned(bytemuck::bytes_of(&q));
        assert_eq!(q, back);
    }
}
