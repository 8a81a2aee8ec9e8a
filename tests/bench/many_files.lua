-- tests/bench/many_files.lua: wrk script for the allocator load test.
-- Every request names one of N distinct files, /many/<i>.bin, at random,
-- so that many chains with different files overlap.
--   wrk -s many_files.lua URL -- N
local n = 1000

function init(args)
	if args[1] then
		n = tonumber(args[1])
	end
	-- Threads start at different clocks: no two walk the same sequence.
	math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end

function request()
	return wrk.format("GET", "/many/" .. math.random(0, n - 1) .. ".bin")
end
