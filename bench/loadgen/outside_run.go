package loadgen

// outsideTrace replays a trace with outside load on every fleet size:
// the clairvoyant bound of the routed requests alone, then kvrouter's
// decision core with and without engine signals and the baselines, each
// offline on the same mixed stream (the real pipeline's replay has no
// outside source: its engine signals run on the wall clock, not the
// model's).
func (r *runner) outsideTrace(name string, reqs []Request) error {
	for _, workers := range r.cfg.Workers {
		mixed, err := MixOutside(reqs, OutsideLoad{Fraction: r.cfg.Outside.Fraction, Seed: r.cfg.Seed}, workers)
		if err != nil {
			return err
		}
		cc := r.cacheConfig(requestsOf(mixed), workers)
		bound, err := ReplayClairvoyant(reqs, r.cacheConfig(reqs, workers))
		if err != nil {
			return err
		}
		label := r.cfg.Outside.Label()
		r.addQuality(QualityRow{Trace: name, Workers: workers, Policy: NameClairvoyant, Valid: true, Outside: label}, bound, bound.HitRate())
		policies, err := Baselines(workers, r.cfg.Seed)
		if err != nil {
			return err
		}
		for _, signals := range []bool{false, true} {
			k, err := NewKVRouterCore(workers, signals)
			if err != nil {
				return err
			}
			policies = append([]Policy{k}, policies...)
		}
		for _, p := range policies {
			t, err := ReplayMixed(mixed, p, cc)
			if err != nil {
				return err
			}
			row := QualityRow{Trace: name, Workers: workers, Policy: p.Name(), Valid: true, Outside: label}
			row.OutsideTTFTMeanMs, row.OutsideTTFTP99Ms = ttftMs(t.OutsideTTFT)
			r.addQuality(row, t, bound.HitRate())
		}
	}
	return nil
}
